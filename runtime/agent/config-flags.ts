/**
 * The agent's command line as parseAgentConfig (config.ts) reads it: the flags it accepts, a
 * flag's value or else its environment twin's, and whole-number values.
 */
import { parseArgs } from "node:util";
import { HiveError } from "../../api/errors.ts";

/** Every flag of `hive agent` (AGENT_USAGE says what each means). */
const AGENT_FLAGS = {
  "node-name": { type: "string" },
  "pod-name": { type: "string" },
  namespace: { type: "string" },
  kubeconfig: { type: "string" },
  server: { type: "string" },
  token: { type: "string" },
  "runtime-socket": { type: "string" },
  "containerd-namespace": { type: "string" },
  "proc-root": { type: "string" },
  "resolve-timeout": { type: "string" },
  "metrics-port": { type: "string" },
  callback: { type: "string" },
  "default-callback": { type: "string" },
  "tenant-callback": { type: "string", multiple: true },
  "callback-headers-secret": { type: "string" },
  "callback-signing-secret": { type: "string" },
  "callback-signing-key": { type: "string" },
  "callback-format": { type: "string" },
  "cluster-name": { type: "string" },
  "log-level": { type: "string" },
  "spool-dir": { type: "string" },
  attach: { type: "string" },
  "bpf-object": { type: "string" },
  "lsm-file": { type: "string" },
  "watch-capacity": { type: "string" },
  "burst-gap": { type: "string" },
  "pin-root": { type: "string" },
  "table-dir": { type: "string" },
  "no-loader": { type: "boolean" },
  "no-pods": { type: "boolean" },
  "no-trap-proof": { type: "boolean" },
  "shared-kernels": { type: "boolean" },
  "lease-duration": { type: "string" },
  "image-layers": { type: "string" },
  "cgroup-root": { type: "string" },
  "runtime-state-dir": { type: "string" },
  daemonset: { type: "string" },
  reports: { type: "string" },
  "report-fail-window": { type: "string" },
} as const;

/** The command line as given, and the environment holding each flag's twin. */
export interface AgentFlags {
  argv: string[];
  values: Record<string, string | boolean | string[] | undefined>;
  env: NodeJS.ProcessEnv;
}

/** Reads the command line; an unknown flag or a missing value is a ConfigInvalid error. */
export function readAgentFlags(argv: string[], env: NodeJS.ProcessEnv): AgentFlags {
  try {
    const { values } = parseArgs({ args: argv, strict: true, options: AGENT_FLAGS });
    return { argv, values, env };
  } catch (error) {
    throw new HiveError("ConfigInvalid", (error as Error).message, {
      object: argv.join(" "),
      hint: "run `hive agent --help`",
    });
  }
}

/** A flag's value as given (flags without an environment twin). */
export function flag(flags: AgentFlags, name: string): string | undefined {
  return flags.values[name] as string | undefined;
}

/** A flag's value, else its environment twin's: the manifest may use either. */
export function flagOrEnv(flags: AgentFlags, name: string, envName: string): string | undefined {
  return flag(flags, name) ?? flags.env[envName] ?? undefined;
}

/** `text` as a whole number (`fallback` when unset or empty); anything else names the flag. */
export function positiveInt(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined || text === "") return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0) {
    throw new HiveError("ConfigInvalid", `${name} must be a whole number`, {
      object: text,
      hint: `e.g. ${name}=${fallback}`,
    });
  }
  return n;
}
