/**
 * The one error type that crosses Hive's boundaries: a closed set of codes, what failed,
 * on which object, and what to do about it. Logged as structured fields, shown to users
 * as `message` + `hint`.
 */
// Grouped by what the user can do about them (the CLI's exit codes follow these groups).
/** A policy or configuration the user wrote is wrong. */
export const INPUT_ERROR_CODES = ["ConfigInvalid", "PolicyInvalid", "InvalidRegex"] as const;
/** This machine's kernel cannot run Hive's program (or, in tests, no VM can be booted). */
export const KERNEL_ERROR_CODES = [
  "BtfMissing",
  "KprobeUnsupported",
  "FentryUnsupported",
  "VerifierRejected",
  "MemlockLimit",
  "PermissionDenied",
  "LibbpfMissing",
  "BpfObjectMissing",
  "BpfCallFailed",
  "PinsOfAnotherLayout",
  "MapFull",
  "QemuUnavailable",
  "ArchitectureUnsupported",
] as const;
/** A trapped file, its container or the loaded program is not there to work on. */
export const TARGET_ERROR_CODES = [
  "FileNotFound",
  "PathEscapesContainer",
  "PathInvalid",
  "ContainerNotFound",
  "ContainerNotReady",
  "RuntimeUnavailable",
  "NotLoaded",
  "TrapNotProven",
  "DenyUnavailable",
] as const;
export const ERROR_CODES = [
  ...INPUT_ERROR_CODES,
  ...KERNEL_ERROR_CODES,
  ...TARGET_ERROR_CODES,
  "ApiRequestFailed",
  "LeaseLost",
  "DeliveryFailed",
  "SpoolCorrupt",
  "SpoolFull",
  "BpffsMissing",
  "InputUnreadable",
] as const;
export type HiveErrorCode = (typeof ERROR_CODES)[number];

export interface HiveErrorDetails {
  /** The object the error is about: a path, a trap id, a pod, a URL… */
  object?: string;
  /** What the user or operator can do about it. */
  hint?: string;
  cause?: unknown;
  [field: string]: unknown;
}

export class HiveError extends Error {
  readonly code: HiveErrorCode;
  readonly object: string | undefined;
  readonly hint: string | undefined;
  readonly details: Record<string, unknown>;

  constructor(code: HiveErrorCode, message: string, details: HiveErrorDetails = {}) {
    const { object, hint, cause, ...rest } = details;
    super(message, cause === undefined ? undefined : { cause });
    this.name = "HiveError";
    this.code = code;
    this.object = object;
    this.hint = hint;
    this.details = rest;
  }

  /** One line for a terminal: what failed, on what, and what to do. */
  describe(): string {
    const on = this.object ? ` (${this.object})` : "";
    const todo = this.hint ? `; ${this.hint}` : "";
    return `${this.code}: ${this.message}${on}${todo}`;
  }

  toJSON(): Record<string, unknown> {
    return { code: this.code, message: this.message, object: this.object, hint: this.hint, ...this.details };
  }
}

export function isHiveError(value: unknown, code?: HiveErrorCode): value is HiveError {
  return value instanceof HiveError && (code === undefined || value.code === code);
}
