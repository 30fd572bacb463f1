/**
 * What a HivePolicy trap's alerts carry for receivers to route and group on: a severity and
 * labels of the trap's own.
 */
import { Type } from "@sinclair/typebox";
import { LABEL_KEY_PATTERN, LABEL_VALUE_PATTERN } from "./kube-name-patterns.ts";

/** How urgent a trap's alerts are, as alerting tools rank them (Alertmanager's `severity` label). */
export const SEVERITIES = ["info", "warning", "critical"] as const;
export type Severity = (typeof SEVERITIES)[number];
export const DEFAULT_SEVERITY: Severity = "warning";

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
