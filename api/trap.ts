/**
 * One trap of a HivePolicy: a file to watch, the containers to watch it in, and what its
 * alerts say and do. Its parts are defined beside it (trap-match, trap-allow, trap-mode,
 * trap-actions, trap-alert-labels).
 */
import { type Static, Type } from "@sinclair/typebox";
import "./formats.ts";
import { AccessKindSchema } from "./meta.ts";
import { DENY_WITH_ALLOW, MAX_DENY_ALLOW_ENTRIES, TRAP_ACTIONS } from "./trap-actions.ts";
import { DEFAULT_SEVERITY, SEVERITIES, TrapLabelsSchema } from "./trap-alert-labels.ts";
import { AllowListSchema } from "./trap-allow.ts";
import { TrapMatchSchema } from "./trap-match.ts";
import { TrapModeSchema } from "./trap-mode.ts";

const TrapPathSchema = Type.String({
  minLength: 1,
  maxLength: 4096,
  pattern: "^/",
  description: "Absolute path of the file inside each matched container.",
  errorMessage: 'must be an absolute path (start with "/")',
  "x-kubernetes-validations": [
    { rule: "self.startsWith('/')", message: 'path must be absolute (start with "/")' },
    // An absolute path holds a ".." component only as "/../" or a final "/..": two linear
    // scans, where split() + exists() cost more than kube-apiserver's per-rule budget.
    {
      rule: "!self.contains('/../') && !self.endsWith('/..')",
      message: "path must not contain '..' components",
    },
  ],
});

export const HiveTrapSchema = Type.Object(
  {
    path: TrapPathSchema,
    create: Type.Optional(
      Type.Boolean({
        description: "Create the file (empty, with `mode`) in the container when it does not exist.",
      }),
    ),
    mode: Type.Optional(TrapModeSchema),
    callback: Type.Optional(
      Type.String({
        format: "http-url",
        maxLength: 2048,
        description: "URL that receives each alert as a JSON POST; defaults to the monitor's callback.",
        errorMessage: "must be an http:// or https:// URL",
        "x-kubernetes-validations": [
          {
            rule: "self.startsWith('http://') || self.startsWith('https://')",
            message: "callback must be an http(s) URL",
          },
        ],
      }),
    ),
    accesses: Type.Optional(
      Type.Array(AccessKindSchema, {
        minItems: 1,
        uniqueItems: true,
        description: "Access kinds that raise an alert (default: all of read, write, exec, append, open).",
        "x-kubernetes-list-type": "set",
      }),
    ),
    changes: Type.Optional(
      Type.Boolean({
        description:
          "Alert on changes of the file (deleted, renamed away, replaced by a rename, truncated) whatever `accesses` says (default true). With false they raise no alert; the trap still follows the file to its new identity.",
      }),
    ),
    match: Type.Optional(TrapMatchSchema),
    allow: Type.Optional(AllowListSchema),
    severity: Type.Optional(
      Type.Union(
        SEVERITIES.map((s) => Type.Literal(s)),
        {
          description: `How urgent this trap's alerts are: ${SEVERITIES.join(", ")} (default ${DEFAULT_SEVERITY}).`,
          errorMessage: `must be one of ${SEVERITIES.join(", ")}`,
        },
      ),
    ),
    labels: Type.Optional(TrapLabelsSchema),
    action: Type.Optional(
      Type.Union(
        TRAP_ACTIONS.map((a) => Type.Literal(a)),
        {
          description:
            "alert (default): report each access. deny: the kernel also refuses it (the process gets EACCES) in the " +
            "containers the trap selects, once the container's own file is armed; the alert says denied: true. " +
            "Where a node's kernel cannot deny, the trap keeps alerting and its status says so.",
          errorMessage: `must be one of ${TRAP_ACTIONS.join(", ")}`,
        },
      ),
    ),
    dryRun: Type.Optional(
      Type.Boolean({
        description:
          "With action: deny, refuse nothing: each alert says what would have been denied (denied: false, deny_reason: dry-run).",
      }),
    ),
  },
  {
    additionalProperties: false,
    description: "A file to watch and the containers to watch it in.",
    "x-kubernetes-validations": [
      {
        rule: "!has(self.mode) || (has(self.create) && self.create)",
        message: "mode only applies with create: true",
      },
      {
        rule: "!has(self.dryRun) || (has(self.action) && self.action == 'deny')",
        message: "dryRun only applies with action: deny",
      },
      {
        rule: `!has(self.allow) || !has(self.action) || self.action != 'deny' || (size(self.allow) <= ${MAX_DENY_ALLOW_ENTRIES} && self.allow.all(e, (!has(e.exe) || !e.exe.endsWith('*')) && (!has(e.parent__dash__exe) || !e.parent__dash__exe.endsWith('*'))))`,
        message: DENY_WITH_ALLOW,
      },
    ],
  },
);
export type HiveTrap = Static<typeof HiveTrapSchema>;
