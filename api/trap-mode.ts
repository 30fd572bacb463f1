/**
 * The `mode` of a file a HivePolicy trap creates: how it is written (octal digits, as a number or
 * a string), which modes are refused, and the conversions to and from permission bits.
 */
import { Type } from "@sinclair/typebox";

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

/** The trap's `mode` field. Not re-exported by api/policy.ts: HiveTrapSchema is its one user. */
export const TrapModeSchema = Type.Union(
  [Type.Integer({ minimum: 0, maximum: 7777 }), Type.String({ pattern: OCTAL_MODE })],
  {
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
  },
);

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
