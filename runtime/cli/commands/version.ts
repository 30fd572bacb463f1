/** `hive version` (also `hive --version`) — which Hive this is: package, kernel program, attach modes. */
import { buildInfo } from "../../build-info.ts";
import { DEFAULT_OBJECT_PATH } from "../../kernel/object-path.ts";
import { type Command, parseCommandArgs } from "../command.ts";
import { EXIT } from "../exit-codes.ts";

const help = `Usage: hive version [--json] [--bpf-object FILE]
       hive --version

Prints the package's version, the compiled kernel program it loads (the SHA-256 of its object
file: "missing" when it is not built), the Node.js running it, and the attach modes the agent
may use (it picks one per kernel). The same values are the labels of the hive_build_info metric.

Options:
  --json            print them as one JSON document
  --bpf-object FILE the compiled program to identify (default ${DEFAULT_OBJECT_PATH})

Exit codes: 0 ok · 2 usage.`;

export const versionCommand: Command = {
  help,
  async run(args) {
    const { values } = parseCommandArgs(
      args,
      { json: { type: "boolean" }, "bpf-object": { type: "string" } },
      false,
    );
    const info = buildInfo(values["bpf-object"]);
    if (values.json) {
      process.stdout.write(`${JSON.stringify(info)}\n`);
      return EXIT.ok;
    }
    const lines = [
      `hive ${info.version}`,
      `program   ${info.program} (${info.programPath})`,
      `attach    ${info.attachModes.join(", ")} (chosen per kernel)`,
      `node      ${info.nodeVersion}`,
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
    return EXIT.ok;
  },
};
