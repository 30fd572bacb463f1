/**
 * The Checker that option checks report to, and the patterns they test names against. Every
 * problem is collected, not just the first, so a user fixes them all in one round.
 */
import { DNS_LABEL_PATTERN, LABEL_KEY_PATTERN, LABEL_VALUE_PATTERN } from "../../api/index.ts";
import type { ArgProblem } from "../builders/problems.ts";
import { isPlainObject } from "../builders/traps.ts";

/** Kubernetes object names: a namespace is a DNS label, most other objects a DNS subdomain. */
export const DNS_LABEL = new RegExp(DNS_LABEL_PATTERN);
export const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
export const LABEL_KEY = new RegExp(LABEL_KEY_PATTERN);
export const LABEL_VALUE = new RegExp(LABEL_VALUE_PATTERN);
export const SECRET_KEY = /^[-._a-zA-Z0-9]{1,253}$/;
/** A Kubernetes quantity: 100m, 128Mi, 1.5, 2e3. */
export const QUANTITY = /^[+-]?(\d+(\.\d*)?|\.\d+)(([KMGTPE]i)|[mkMGTPE]|[eE][+-]?\d+)?$/;

export class Checker {
  readonly problems: ArgProblem[] = [];
  add(option: string, message: string): void {
    this.problems.push({ option, message });
  }
  name(option: string, value: unknown, pattern: RegExp, what: string): value is string {
    if (typeof value === "string" && pattern.test(value)) return true;
    this.add(option, `${JSON.stringify(value)} is not ${what}`);
    return false;
  }
  oneOf<T extends string>(option: string, value: unknown, allowed: readonly T[]): value is T {
    if (allowed.includes(value as T)) return true;
    this.add(option, `${JSON.stringify(value)} is not one of ${allowed.join(", ")}`);
    return false;
  }
  flag(option: string, value: unknown): value is boolean {
    if (typeof value === "boolean") return true;
    this.add(option, "must be true or false");
    return false;
  }
  hostPath(option: string, value: unknown): value is string {
    if (
      typeof value === "string" &&
      value.startsWith("/") &&
      value !== "/" &&
      !value.split("/").includes("..")
    ) {
      return true;
    }
    this.add(option, `${JSON.stringify(value)} must be an absolute host path (not "/", no ".." components)`);
    return false;
  }
  labels(option: string, value: unknown): value is Record<string, string> {
    if (!isPlainObject(value)) {
      this.add(option, 'must map label names to values, e.g. { disktype: "ssd" }');
      return false;
    }
    let ok = true;
    for (const [k, v] of Object.entries(value)) {
      if (!LABEL_KEY.test(k)) ok = this.fail(`${option}.${k}`, "the key is not a valid label name");
      else if (typeof v !== "string" || !LABEL_VALUE.test(v)) {
        ok = this.fail(
          `${option}.${k}`,
          `${JSON.stringify(v)} is not a valid label value (63 characters, alphanumeric, - _ .)`,
        );
      }
    }
    return ok;
  }
  fail(option: string, message: string): false {
    this.add(option, message);
    return false;
  }
}
