#!/usr/bin/env node
/**
 * The `hive` command (the package's bin; the agent image runs `hive agent`). Only
 * composes: each subcommand lives in commands/ and is imported when it runs, so that
 * `hive validate` never loads libbpf and `hive status` never loads Pulumi.
 */
import { type HiveError, isHiveError } from "../../api/errors.ts";
import { type Command, UsageError } from "./command.ts";
import { EXIT, type ExitCode, exitCodeFor } from "./exit-codes.ts";

interface Entry {
  summary: string;
  load(): Promise<Command>;
}

const COMMANDS: Record<string, Entry> = {
  agent: {
    summary: "run the node agent (what the DaemonSet runs)",
    load: async () => (await import("./commands/agent.ts")).agentCommand,
  },
  watch: {
    summary: "standalone: watch the files of HivePolicy files on this machine",
    load: async () => (await import("./commands/watch.ts")).watchCommand,
  },
  render: {
    summary: "print the Kubernetes manifests the Pulumi component creates, as YAML",
    load: async () => (await import("./commands/render.ts")).renderCommand,
  },
  validate: {
    summary: "check HivePolicy files; one line per problem",
    load: async () => (await import("./commands/validate.ts")).validateCommand,
  },
  status: {
    summary: "what the local kernel has loaded: program, attach mode, watched files, counters",
    load: async () => (await import("./commands/status.ts")).statusCommand,
  },
  version: {
    summary: "the package's version, its kernel program's digest and the attach modes (also --version)",
    load: async () => (await import("./commands/version.ts")).versionCommand,
  },
};

/** Spellings of a command that other tools use: `hive --version` as `git --version`. */
const ALIASES: Record<string, string> = { "--version": "version", "-V": "version" };

export const MAIN_HELP = `Usage: hive COMMAND [OPTIONS]

Hive reports every access to trapped files, in Kubernetes pods or on this machine.

Commands:
${Object.entries(COMMANDS)
  .map(([name, entry]) => `  ${name.padEnd(9)} ${entry.summary}`)
  .join("\n")}

Run \`hive COMMAND --help\` for a command's options.

Exit codes: 0 ok · 1 invalid policy/config · 2 usage · 3 kernel cannot run Hive ·
4 nothing to watch / nothing loaded · 5 unreadable input · 70 internal error.
Logs are JSON lines on stderr (HIVE_LOG_LEVEL=debug|info|warn|error); alerts go to stdout.`;

/**
 * One line for a one-line error (HiveError.describe); a multi-line one (every problem of a
 * config, a verifier log) keeps its lines, indented, with the hint last.
 */
export function describeError(command: string, error: HiveError): string {
  const [first = "", ...rest] = error.message.split("\n");
  if (rest.length === 0 && !error.hint?.includes("\n")) return `hive ${command}: ${error.describe()}`;
  const on = error.object ? ` (${error.object})` : "";
  const head = first.endsWith(":") ? `${first.slice(0, -1)}${on}:` : `${first}${on}`;
  const lines = [`hive ${command}: ${error.code}: ${head}`, ...rest.map((l) => `  ${l}`)];
  if (error.hint)
    lines.push(...error.hint.split("\n").map((l, i) => (i === 0 ? `  hint: ${l}` : `    ${l}`)));
  return lines.join("\n");
}

/** Runs one command line (without `node main.js`) and returns the exit code. */
export async function runCli(argv: string[]): Promise<ExitCode> {
  const [given, ...args] = argv;
  const name = given === undefined ? undefined : (ALIASES[given] ?? given);
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    const topic = name === "help" ? args[0] : undefined;
    if (topic === undefined) {
      process.stdout.write(`${MAIN_HELP}\n`);
      return name === undefined ? EXIT.usage : EXIT.ok;
    }
    return runCli([topic, "--help"]);
  }
  const entry = COMMANDS[name];
  if (entry === undefined) {
    process.stderr.write(`hive: unknown command "${name}"; run \`hive --help\` for the list\n`);
    return EXIT.usage;
  }
  const command = await entry.load();
  // --help wins over everything else on the line, even over options the command would reject.
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(`${command.help}\n`);
    return EXIT.ok;
  }
  try {
    return await command.run(args);
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`hive ${name}: ${error.message}\nRun \`hive ${name} --help\` for usage.\n`);
      return EXIT.usage;
    }
    if (isHiveError(error)) {
      process.stderr.write(`${describeError(name, error)}\n`);
    } else {
      const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
      process.stderr.write(`hive ${name}: internal error, please report it: ${detail}\n`);
    }
    return exitCodeFor(error);
  }
}

// Run only as the program itself, not when a test imports runCli.
const invoked = process.argv[1];
if (invoked !== undefined && import.meta.filename === (await import("node:fs")).realpathSync(invoked)) {
  // Exit explicitly: a detached watcher or a closed HTTP pool must not keep the process alive
  // (stdout and stderr are synchronous for files and pipes on Linux, so nothing is cut off).
  process.exit(await runCli(process.argv.slice(2)));
}
