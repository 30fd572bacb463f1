/**
 * What every `hive` subcommand is: its own `--help` text and a `run` that returns an exit
 * code (runtime/cli/exit-codes.ts); its name and one-line summary live in main.ts's table,
 * which lists the commands without loading them. Errors that end a command are thrown as
 * HiveError (what, which object, what to do) or UsageError, and main.ts turns them into one
 * line on stderr and the documented exit code.
 */
import { type ParseArgsConfig, parseArgs } from "node:util";
import type { ExitCode } from "./exit-codes.ts";

export interface Command {
  help: string;
  run(args: string[]): Promise<ExitCode>;
}

/** The command line was wrong; the message says how, and the command's --help says how to fix it. */
export class UsageError extends Error {
  override name = "UsageError";
}

type Options = NonNullable<ParseArgsConfig["options"]>;

/**
 * node:util parseArgs with `--help` added to every command and its TypeErrors (unknown
 * option, missing value) turned into UsageErrors a user can act on.
 */
export function parseCommandArgs<O extends Options>(args: string[], options: O, allowPositionals: boolean) {
  try {
    return parseArgs({
      args,
      options: { ...options, help: { type: "boolean", short: "h" } },
      allowPositionals,
      strict: true,
    });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new UsageError(message.replace(/\. To specify a positional argument.*$/s, ""));
  }
}
