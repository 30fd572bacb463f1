/**
 * `hive render` — the Kubernetes objects the HiveMonitor Pulumi component creates, as one
 * YAML stream for kubectl users. The objects come from the component's own builders
 * (component/render.ts), so the two can never drift apart.
 */
import { readFile } from "node:fs/promises";
import { parse } from "yaml";
import { HiveError } from "../../../api/errors.ts";
import type { HiveMonitorArgs } from "../../../component/args.ts";
import { type RenderPart, renderYaml } from "../../../component/render.ts";
import { type Command, parseCommandArgs, UsageError } from "../command.ts";
import { EXIT } from "../exit-codes.ts";

const help = `Usage: hive render [--config FILE] [--image IMAGE] [--only crds | --skip-crds]

Prints, as a multi-document YAML stream on stdout, every Kubernetes object the HiveMonitor
Pulumi component would create: Namespace, CRDs, ServiceAccount, RBAC, the Secret holding the
callback URL, admission policy, the ResourceQuota admitting the agent's priority class, the
agent DaemonSet and the HivePolicies of the configured traps, and what the config asks for of
the PodMonitor, PrometheusRule and Grafana dashboard ConfigMap (podMonitor, prometheusRule,
grafanaDashboard: true). The Secret's URL is printed too: keep the output as you keep the URL.

kubectl maps every object of a stream before it creates the first one, so on a new cluster
the HivePolicies of a stream that also holds their CRDs are refused ("ensure CRDs are installed
first"). Apply the CRDs first, then the rest:
  hive render --config hive.yaml --only crds | kubectl apply -f -
  kubectl wait --for=condition=Established crd/hivepolicies.hive-operator.com crd/hivedata.hive-operator.com
  hive render --config hive.yaml --skip-crds | kubectl apply -f -

Options:
  --config FILE  the component's arguments (HiveMonitorArgs) as YAML or JSON; "-" reads stdin.
                 Example:
                   image: registry.example.com/hive:0.1.0
                   callback: { url: "https://alerts.example.com/hive" }
                   traps:
                     - path: /etc/shadow
                       match: { matchLabels: { security: high } }
  --image IMAGE  the agent image (overrides the file's \`image\`)
  --only crds    print the CustomResourceDefinitions only
  --skip-crds    print everything but the CustomResourceDefinitions

Exit codes: 0 printed · 1 invalid configuration (every problem is named) · 2 usage ·
5 the config file could not be read.`;

/** The part of the objects the command line asks for. */
function partOf(only: string | undefined, skipCrds: boolean | undefined): RenderPart {
  if (only !== undefined && only !== "crds") throw new UsageError(`--only takes "crds", not "${only}"`);
  if (only !== undefined && skipCrds) throw new UsageError("--only crds and --skip-crds exclude each other");
  return only === "crds" ? "crds" : skipCrds ? "without-crds" : "all";
}

async function readConfig(file: string): Promise<unknown> {
  let text: string;
  try {
    text = file === "-" ? await readStdin() : await readFile(file, "utf8");
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code ?? "error";
    throw new HiveError("InputUnreadable", `cannot read the config file (${code})`, {
      object: file,
      hint: code === "ENOENT" ? "check the path" : "check that the file is readable by this user",
      cause,
    });
  }
  try {
    return parse(text) ?? {};
  } catch (cause) {
    throw new HiveError(
      "ConfigInvalid",
      `the config file is not valid YAML or JSON: ${(cause as Error).message}`,
      {
        object: file,
        cause,
      },
    );
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

export const renderCommand: Command = {
  help,
  async run(args) {
    const { values } = parseCommandArgs(
      args,
      {
        config: { type: "string" },
        image: { type: "string" },
        only: { type: "string" },
        "skip-crds": { type: "boolean" },
      },
      false,
    );
    const part = partOf(values.only, values["skip-crds"]);
    const config = values.config === undefined ? {} : await readConfig(values.config);
    if (config === null || typeof config !== "object" || Array.isArray(config)) {
      throw new HiveError("ConfigInvalid", "the config file must hold one object of HiveMonitor options", {
        object: values.config,
        hint: "see `hive render --help` for an example",
      });
    }
    const monitorArgs = { ...config, ...(values.image === undefined ? {} : { image: values.image }) };
    // renderYaml validates every option (unknown names included) and names each problem.
    process.stdout.write(renderYaml(monitorArgs as HiveMonitorArgs, part));
    return EXIT.ok;
  },
};
