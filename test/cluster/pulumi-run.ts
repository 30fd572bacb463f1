/**
 * Runs one Pulumi operation on a program file with the real Pulumi CLI and engine (local file
 * backend) and the real Kubernetes provider, then prints the result as one JSON line.
 *
 *   node --conditions=hive-source test/cluster/pulumi-run.ts '<json RunRequest>'
 *
 * The program file is the user's, unchanged (examples/quickstart/index.ts). It runs in this
 * process through the Automation API's inline-program host, which serves the engine the language
 * runtime the `pulumi-language-nodejs` plugin would (that plugin is not published as a Go module
 * version the machines here can fetch): the engine, the state, the provider and every resource
 * operation are the real ones. Run in a child process so that each operation loads the program
 * afresh, as `pulumi up` does.
 */
import { pathToFileURL } from "node:url";
import { LocalWorkspace, PulumiCommand } from "@pulumi/pulumi/automation/index.js";

export interface RunRequest {
  op: "up" | "preview" | "destroy";
  program: string;
  workDir: string;
  backendDir: string;
  stack: string;
  project: string;
  /** `pulumi config set [--secret] KEY VALUE` before the operation. */
  config?: Record<string, { value: string; secret?: boolean }>;
}

export interface RunResult {
  op: RunRequest["op"];
  /** Resource changes by kind of operation ("create", "update", "same", "delete", …). */
  changes: Record<string, number>;
  outputs: Record<string, unknown>;
  stdout: string;
}

async function run(req: RunRequest): Promise<RunResult> {
  const program = async () => ({ ...(await import(pathToFileURL(req.program).href)) });
  const pulumiCommand = await PulumiCommand.get({ skipVersionCheck: false });
  const stack = await LocalWorkspace.createOrSelectStack(
    { stackName: req.stack, projectName: req.project, program },
    {
      workDir: req.workDir,
      pulumiCommand,
      projectSettings: { name: req.project, runtime: "nodejs", backend: { url: `file://${req.backendDir}` } },
    },
  );
  for (const [key, { value, secret }] of Object.entries(req.config ?? {})) {
    await stack.setConfig(key, { value, secret: secret ?? false });
  }
  let stdout = "";
  const onOutput = (s: string) => {
    stdout += s;
  };
  if (req.op === "preview") {
    const r = await stack.preview({ onOutput, diff: true });
    return { op: req.op, changes: r.changeSummary as Record<string, number>, outputs: {}, stdout };
  }
  if (req.op === "destroy") {
    const r = await stack.destroy({ onOutput });
    return {
      op: req.op,
      changes: (r.summary.resourceChanges ?? {}) as Record<string, number>,
      outputs: {},
      stdout,
    };
  }
  const r = await stack.up({ onOutput, diff: true });
  const outputs = Object.fromEntries(Object.entries(r.outputs).map(([k, v]) => [k, v.value]));
  return {
    op: req.op,
    changes: (r.summary.resourceChanges ?? {}) as Record<string, number>,
    outputs,
    stdout,
  };
}

run(JSON.parse(process.argv[2] ?? "{}") as RunRequest).then(
  // Exit only once the line is written: a pipe takes it asynchronously, and the engine's
  // host would otherwise keep the process alive.
  (result) => {
    process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
  },
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`, () =>
      process.exit(1),
    );
  },
);
