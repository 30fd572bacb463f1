/**
 * HivePolicy: the one definition. The CRD's openAPIV3Schema (api/crd.ts), the TypeScript
 * types, and runtime validation (api/validate.ts) all derive from the schemas below.
 * Field names follow the reference design exactly (`container-name`, `matchLabels`);
 * fields Hive adds are camelCase, as Kubernetes conventions ask.
 */
import { type Static, Type } from "@sinclair/typebox";
import "./formats.ts";
import {
  ACCESS_KINDS,
  AccessKindSchema,
  API_VERSION,
  ConditionSchema,
  KIND_POLICY,
  ObjectMetaSchema,
} from "./meta.ts";

/** Kubernetes label keys and values, and namespace names (DNS labels), as schema patterns. */
export const LABEL_KEY_PATTERN =
  "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";
export const LABEL_VALUE_PATTERN = "^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$";
export const DNS_LABEL_PATTERN = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$";
const DNS_SUBDOMAIN = "^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$";

/** `^0?[0-7]{1,4}$` — octal digits, read as octal whether written as a number or a string. */
export const OCTAL_MODE = "^0?[0-7]{1,4}$";
/**
 * The modes `create` may give a file: no setuid, setgid or sticky bit (the digit before the
 * last three is 0 or absent), not writable by others (the last digit is 0, 1, 4 or 5). A
 * created setuid binary or a world-writable `/etc/ld.so.preload` is a root escalation inside
 * the container. Applies to digits that match OCTAL_MODE.
 */
export const SAFE_MODE = "^0?0?[0-7]{0,2}[0145]$";
/** The permission bits SAFE_MODE refuses: setuid, setgid, sticky, write by others. */
export const ESCALATING_MODE_BITS = 0o7002;
const SAFE_MODE_MESSAGE = "must not set setuid, setgid, sticky or world-writable bits";

export const TrapMatchSchema = Type.Object(
  {
    pod: Type.Optional(
      Type.String({
        pattern: DNS_SUBDOMAIN,
        description: "Name of the pod.",
        errorMessage: "must be a pod name (a DNS subdomain)",
      }),
    ),
    namespace: Type.Optional(
      Type.String({
        pattern: DNS_LABEL_PATTERN,
        description: "Namespace of the pod.",
        errorMessage: "must be a namespace name (a DNS label)",
      }),
    ),
    ip: Type.Optional(
      Type.String({
        format: "ipv4",
        description: "IPv4 address of the pod.",
        errorMessage: "must be an IPv4 address such as 10.0.0.7",
      }),
    ),
    "container-name": Type.Optional(
      Type.String({
        format: "regex",
        minLength: 1,
        maxLength: 1024,
        description:
          "Regular expression (RE2 syntax: no backreferences or lookaround) the container name must match (anchored at both ends).",
        errorMessage:
          "must be a regular expression RE2 accepts (no backreferences or lookaround) of bounded size",
        "x-kubernetes-validations": [
          {
            // CEL's matches() compiles its pattern with RE2 and fails on one RE2 refuses, which
            // refuses the object; the rule holds for every pattern that compiles.
            rule: "type(''.matches(self)) == bool",
            message:
              "container-name must be a regular expression RE2 accepts (no backreferences or lookaround)",
          },
        ],
      }),
    ),
    matchLabels: Type.Optional(
      Type.Record(
        Type.String({ pattern: LABEL_KEY_PATTERN }),
        Type.String({ pattern: LABEL_VALUE_PATTERN, maxLength: 63 }),
        {
          description: "Labels the pod must carry, all of them, with these values.",
          errorMessage: "must map label names to label values",
        },
      ),
    ),
  },
  {
    additionalProperties: false,
    description: "Which pods and containers the trap applies to; no filter matches every pod.",
  },
);
export type TrapMatch = Static<typeof TrapMatchSchema>;

/** The most entries one trap's `allow` list holds (bounds the CRD's CEL cost and the matcher's work). */
export const MAX_ALLOW_ENTRIES = 64;
/** Longest executable path an allow entry may name (PATH_MAX). */
export const MAX_EXE_LENGTH = 4096;
/** An allow entry's executable: an absolute path, `*` only as its last character (a prefix). */
export const EXE_PATTERN = "^/[^*]*[*]?$";

function exePatternSchema(field: string, description: string) {
  return Type.String({
    minLength: 1,
    maxLength: MAX_EXE_LENGTH,
    pattern: EXE_PATTERN,
    description,
    errorMessage: 'must be an absolute path (start with "/"), with "*" only as its last character',
    // No CEL `matches` beside `pattern`: over 256 traps × 64 entries × 4096 characters its
    // estimated cost is 8× what kube-apiserver accepts for a rule, and the CRD would be refused.
    "x-kubernetes-validations": [
      { rule: "self.startsWith('/')", message: `${field} must be an absolute path (start with "/")` },
    ],
  });
}

/**
 * One expected accessor of a trapped file. Decided only on what the kernel recorded at the
 * access (runtime/alerts/allowlist.ts): an executable the kernel did not know never matches.
 */
export const AllowEntrySchema = Type.Object(
  {
    exe: Type.Optional(
      exePatternSchema(
        "exe",
        "Executable of the accessing process as the kernel resolved it (inside its container), e.g. /usr/sbin/sshd; " +
          "a trailing * matches every path that starts with what precedes it.",
      ),
    ),
    "parent-exe": Type.Optional(
      exePatternSchema(
        "parent-exe",
        "Executable of the accessing process's parent as the kernel resolved it, e.g. /usr/sbin/cron; a trailing * matches a prefix.",
      ),
    ),
    accesses: Type.Optional(
      Type.Array(AccessKindSchema, {
        minItems: 1,
        maxItems: ACCESS_KINDS.length,
        uniqueItems: true,
        description: "Allow only accesses whose kinds are all among these (default: any kind).",
        "x-kubernetes-list-type": "set",
      }),
    ),
  },
  {
    additionalProperties: false,
    description:
      "An expected accessor: an access matching every field given is counted (hive_allowed_accesses_total), not alerted.",
    "x-kubernetes-validations": [
      {
        // Kubernetes CEL spells the property `parent-exe` as `parent__dash__exe`.
        rule: "has(self.exe) || has(self.parent__dash__exe)",
        message: "an allow entry needs exe or parent-exe",
      },
    ],
  },
);
export type AllowEntry = Static<typeof AllowEntrySchema>;

/** The `allow` list of a trap (and of each HiveData discover writes for it). */
export const AllowListSchema = Type.Array(AllowEntrySchema, {
  maxItems: MAX_ALLOW_ENTRIES,
  description:
    "Expected accessors: an access that matches every field of some entry raises no alert and is counted instead. " +
    "An access whose executable the kernel did not know is never allowed.",
});

/** How urgent a trap's alerts are, as alerting tools rank them (Alertmanager's `severity` label). */
export const SEVERITIES = ["info", "warning", "critical"] as const;
export type Severity = (typeof SEVERITIES)[number];
export const DEFAULT_SEVERITY: Severity = "warning";

/**
 * What a trap does with an access: `alert` reports it; `deny` also has the kernel refuse it
 * (EACCES) in the containers the trap selects, where the node's kernel can (bpf/hive.bpf.c
 * hive_deny). `dryRun` reports what deny would refuse and refuses nothing.
 */
export const TRAP_ACTIONS = ["alert", "deny"] as const;
export type TrapAction = (typeof TRAP_ACTIONS)[number];

/** What a trap asks the kernel to do besides reporting: refuse ("deny"), mark ("dryRun"), or nothing. */
export function trapDeny(trap: Pick<HiveTrap, "action" | "dryRun">): "deny" | "dryRun" | undefined {
  if (trap.action !== "deny") return undefined;
  return trap.dryRun === true ? "dryRun" : "deny";
}

/** What the kernel does with a file several traps watch: one that denies makes it deny. */
export function strongestDeny(
  denies: ReadonlyArray<"deny" | "dryRun" | undefined>,
): "deny" | "dryRun" | undefined {
  if (denies.includes("deny")) return "deny";
  return denies.includes("dryRun") ? "dryRun" : undefined;
}

/** The most labels one trap gives its alerts (bounds every alert's size and the CRD's CEL cost). */
export const MAX_TRAP_LABELS = 32;

/** CEL spells a backslash in a single-quoted string as two. */
function celString(text: string): string {
  return text.replaceAll("\\", "\\\\").replaceAll("'", "\\'");
}

export const TrapLabelsSchema = Type.Record(
  Type.String({ pattern: LABEL_KEY_PATTERN }),
  Type.String({
    pattern: LABEL_VALUE_PATTERN,
    maxLength: 63,
    errorMessage:
      "must be a label value: at most 63 letters, digits, - _ . (beginning and ending with a letter or digit)",
  }),
  {
    maxProperties: MAX_TRAP_LABELS,
    description:
      "Labels every alert of this trap carries (e.g. team: payments), as Kubernetes label names and values; " +
      "receivers route and group on them.",
    errorMessage: `must map label names to label values, at most ${MAX_TRAP_LABELS} of them`,
    "x-kubernetes-validations": [
      {
        rule: `self.all(k, k.matches('${celString(LABEL_KEY_PATTERN)}'))`,
        message: "labels keys must be label names such as team or example.com/team",
      },
    ],
  },
);

/** Until the allow decision is made in the kernel, a denying trap cannot let anyone through. */
export const DENY_WITH_ALLOW =
  "action: deny takes no allow list: who may pass is decided after the access, too late to deny (use action: alert with allow)";

export const HiveTrapSchema = Type.Object(
  {
    path: Type.String({
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
    }),
    create: Type.Optional(
      Type.Boolean({
        description: "Create the file (empty, with `mode`) in the container when it does not exist.",
      }),
    ),
    mode: Type.Optional(
      Type.Union([Type.Integer({ minimum: 0, maximum: 7777 }), Type.String({ pattern: OCTAL_MODE })], {
        description:
          'Permission bits for a created file, in octal digits: 444, "444" and "0444" all mean r--r--r--. ' +
          "A number is read as octal digits, as in the reference design.",
        errorMessage: 'must be an octal permission mode such as 444 or "0644"',
        "x-kubernetes-int-or-string": true,
        // Bounds what kube-apiserver's CEL cost estimate assumes of string(self): unbounded, the
        // two rules below cost 40× and 97× the per-rule budget and the CRD is refused.
        maxLength: 5,
        "x-kubernetes-validations": [
          {
            rule: `string(self).matches('${OCTAL_MODE}')`,
            message: 'mode must be octal digits such as 444 or "0644"',
          },
          {
            rule: `!string(self).matches('${OCTAL_MODE}') || string(self).matches('${SAFE_MODE}')`,
            message: `mode ${SAFE_MODE_MESSAGE} (such as 4755 or 0666); use a mode such as 0644 or 0444`,
          },
        ],
      }),
    ),
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
        rule: "!has(self.allow) || !has(self.action) || self.action != 'deny'",
        message: DENY_WITH_ALLOW,
      },
    ],
  },
);
export type HiveTrap = Static<typeof HiveTrapSchema>;

/** The most traps one HivePolicy holds. */
export const MAX_TRAPS_PER_POLICY = 256;

export const HivePolicySpecSchema = Type.Object(
  {
    traps: Type.Array(HiveTrapSchema, {
      minItems: 1,
      maxItems: MAX_TRAPS_PER_POLICY,
      description: "The traps of this policy.",
      errorMessage: "must list at least one trap",
    }),
  },
  { additionalProperties: false },
);
export type HivePolicySpec = Static<typeof HivePolicySpecSchema>;

export const TrapErrorSchema = Type.Object({
  node: Type.Optional(Type.String()),
  pod: Type.Optional(Type.String()),
  container: Type.Optional(Type.String()),
  reason: Type.String({
    description: "Machine-readable cause: FileNotFound, InvalidRegex, PathEscapesContainer, …",
  }),
  message: Type.String(),
});
export type TrapError = Static<typeof TrapErrorSchema>;

export const TrapStatusSchema = Type.Object({
  trapId: Type.String({ description: "The trap's stable id (the `trap-id` label of its HiveData)." }),
  path: Type.String(),
  matchedContainers: Type.Integer({ minimum: 0, description: "Containers this trap currently applies to." }),
  inodesFound: Type.Integer({
    minimum: 0,
    description: "Containers in which the file was found and is watched.",
  }),
  errors: Type.Optional(Type.Array(TrapErrorSchema, { maxItems: 32 })),
});
export type TrapStatus = Static<typeof TrapStatusSchema>;

export const HivePolicyStatusSchema = Type.Object({
  observedGeneration: Type.Optional(Type.Integer({ minimum: 0 })),
  trapCount: Type.Optional(Type.Integer({ minimum: 0 })),
  matchedContainers: Type.Optional(Type.Integer({ minimum: 0 })),
  podsUncovered: Type.Optional(
    Type.Integer({
      minimum: 0,
      description:
        "Pods the traps select that run on nodes without a ready Hive agent: nothing watches their files (the NodesCovered condition names them).",
    }),
  ),
  conditions: Type.Optional(
    Type.Array(ConditionSchema, { "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"] }),
  ),
  traps: Type.Optional(Type.Array(TrapStatusSchema)),
});
export type HivePolicyStatus = Static<typeof HivePolicyStatusSchema>;

export const HivePolicySchema = Type.Object(
  {
    apiVersion: Type.Literal(API_VERSION),
    kind: Type.Literal(KIND_POLICY),
    metadata: ObjectMetaSchema,
    spec: HivePolicySpecSchema,
    status: Type.Optional(HivePolicyStatusSchema),
  },
  {
    description:
      "Files to watch in matching pods; every access raises an alert, unless the trap's allow list expects it.",
  },
);
export type HivePolicy = Static<typeof HivePolicySchema>;

/** Why a mode (permission bits) may not be given to a created file, or undefined when it may. */
export function modeProblem(bits: number): string | undefined {
  return (bits & ESCALATING_MODE_BITS) === 0
    ? undefined
    : `${SAFE_MODE_MESSAGE}; use a mode such as 0644 or 0444`;
}

/**
 * Reads a trap's `mode` (reference style: octal digits as number or string) as permission bits.
 * Refuses escalating bits too: a policy admitted before the CRD refused them creates nothing.
 */
export function parseMode(mode: number | string): number {
  const digits = String(mode);
  if (!new RegExp(OCTAL_MODE).test(digits)) {
    throw new RangeError(`mode ${JSON.stringify(mode)} is not octal digits such as 444 or "0644"`);
  }
  const bits = Number.parseInt(digits, 8);
  const problem = modeProblem(bits);
  if (problem !== undefined) throw new RangeError(`mode ${JSON.stringify(mode)} ${problem}`);
  return bits;
}

/** Writes permission bits (e.g. 0o444) as the resource's octal string ("0444"). */
export function formatMode(bits: number): string {
  if (!Number.isInteger(bits) || bits < 0 || bits > 0o7777) {
    throw new RangeError(`mode ${bits} is outside 0 to 0o7777`);
  }
  return `0${bits.toString(8).padStart(3, "0")}`;
}
