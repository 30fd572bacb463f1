/**
 * HivePolicy: the one definition. The CRD's openAPIV3Schema (api/crd.ts), the TypeScript
 * types, and runtime validation (api/validate.ts) all derive from the schemas below and the
 * ones they are built from, each in a file of its own and re-exported here.
 * Field names follow the reference design exactly (`container-name`, `matchLabels`);
 * fields Hive adds are camelCase, as Kubernetes conventions ask.
 */
import { type Static, Type } from "@sinclair/typebox";
import "./formats.ts";
import { API_VERSION, KIND_POLICY, ObjectMetaSchema } from "./meta.ts";
import { HivePolicyStatusSchema } from "./policy-status.ts";
import { HiveTrapSchema } from "./trap.ts";

// Named re-exports, not `export *`: the parts' internal helpers stay out of the public API.
export { DNS_LABEL_PATTERN, LABEL_KEY_PATTERN, LABEL_VALUE_PATTERN } from "./kube-name-patterns.ts";
export {
  type HivePolicyStatus,
  HivePolicyStatusSchema,
  type TrapError,
  TrapErrorSchema,
  type TrapStatus,
  TrapStatusSchema,
} from "./policy-status.ts";
export { type HiveTrap, HiveTrapSchema } from "./trap.ts";
export {
  DENY_WITH_ALLOW,
  MAX_DENY_ALLOW_ENTRIES,
  strongestDeny,
  TRAP_ACTIONS,
  type TrapAction,
  trapDeny,
} from "./trap-actions.ts";
export {
  DEFAULT_SEVERITY,
  MAX_TRAP_LABELS,
  SEVERITIES,
  type Severity,
  TrapLabelsSchema,
} from "./trap-alert-labels.ts";
export {
  type AllowEntry,
  AllowEntrySchema,
  AllowListSchema,
  EXE_PATTERN,
  MAX_ALLOW_ENTRIES,
  MAX_EXE_LENGTH,
} from "./trap-allow.ts";
export { type TrapMatch, TrapMatchSchema } from "./trap-match.ts";
export {
  ESCALATING_MODE_BITS,
  formatMode,
  modeProblem,
  OCTAL_MODE,
  parseMode,
  SAFE_MODE,
} from "./trap-mode.ts";

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
