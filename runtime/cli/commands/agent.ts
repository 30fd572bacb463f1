/** `hive agent` — the node agent the DaemonSet runs; its options and lifecycle live in runtime/agent. */
import { AGENT_USAGE } from "../../agent/config.ts";
import type { Command } from "../command.ts";
import { EXIT, type ExitCode } from "../exit-codes.ts";

const help = `Usage: hive agent [OPTIONS]

${AGENT_USAGE}

Exit codes: 0 stopped after SIGTERM/SIGINT · 2 invalid configuration (named on stderr) ·
3 the kernel program cannot be loaded on this node · 70 internal error.`;

const KNOWN: ReadonlySet<number> = new Set(Object.values(EXIT));

export const agentCommand: Command = {
  help,
  async run(args) {
    // Imported only here: the agent pulls in the Kubernetes client, which other commands never need.
    const { runAgent } = await import("../../agent/main.ts");
    const code = await runAgent(args);
    return (KNOWN.has(code) ? code : EXIT.internal) as ExitCode;
  },
};
