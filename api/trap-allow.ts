/**
 * The `allow` list of a HivePolicy trap: the expected accessors of a trapped file, whose accesses
 * are counted instead of alerted (runtime/alerts/allowlist.ts decides the match).
 */
import { type Static, Type } from "@sinclair/typebox";
import { ACCESS_KINDS, AccessKindSchema } from "./meta.ts";

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
