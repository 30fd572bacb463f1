/**
 * The `hive` command's exit codes: a closed set, documented in docs/cli.md's "Exit codes"
 * table (test/contract/docs.test.ts keeps the two in step). Scripts branch on these, so a
 * number never changes meaning.
 */
import {
  type HiveErrorCode,
  INPUT_ERROR_CODES,
  isHiveError,
  KERNEL_ERROR_CODES,
  TARGET_ERROR_CODES,
} from "../../api/errors.ts";

export const EXIT = {
  /** Success; for `watch`, also a clean detach after Ctrl-C / SIGTERM. */
  ok: 0,
  /** A policy or configuration file is invalid (`validate` found problems; `watch`/`render` refused one). */
  invalid: 1,
  /** The command line is wrong: unknown command or option, missing argument. */
  usage: 2,
  /** This machine cannot run the kernel program: not root, no BTF, no kprobes/fentry, verifier, libbpf. */
  kernel: 3,
  /** Nothing to work on: no trapped file could be resolved (`watch`), nothing loaded (`status`). */
  nothing: 4,
  /** A file could not be read or written (policy file, config file, state directory). */
  io: 5,
  /** An unexpected internal error: a bug, please report it with the log lines. */
  internal: 70,
} as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

const INPUT_CODES: ReadonlySet<HiveErrorCode> = new Set(INPUT_ERROR_CODES);
const KERNEL_CODES: ReadonlySet<HiveErrorCode> = new Set(KERNEL_ERROR_CODES);
const NOTHING_CODES: ReadonlySet<HiveErrorCode> = new Set(TARGET_ERROR_CODES);

/** The exit code for an error that ended a command. */
export function exitCodeFor(error: unknown): ExitCode {
  if (!isHiveError(error)) return EXIT.internal;
  if (INPUT_CODES.has(error.code)) return EXIT.invalid;
  if (KERNEL_CODES.has(error.code)) return EXIT.kernel;
  if (NOTHING_CODES.has(error.code)) return EXIT.nothing;
  if (error.code === "InputUnreadable") return EXIT.io;
  return EXIT.internal;
}
