/**
 * Runs inside a test VM (test/kernel/vm.ts), as root, on a stock kernel: the agent image
 * built from Dockerfile, imported into a private containerd, started by `ctr run` with the
 * container spec of the DaemonSet that HiveMonitor renders (test/image/ctr-run-args.ts), as
 * `hive agent` against the real kube-apiserver on the host (reached at the guest's one forwarded
 * address: test/cluster/guest-api.ts) over TLS with a pod-bound service-account token, exactly as
 * in a cluster. A real container holds the trapped file; a read inside it must reach the
 * callback receiver. With HIVE_IMAGE_LIFECYCLE=1 it then takes the agent through an API-server
 * outage, a SIGKILL and restart, and a SIGTERM (lifecycle.ts). Writes what it saw to
 * $HIVE_RESULTS (the host test asserts on it).
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { GROUP, PLURAL_DATA, VERSION } from "../../../api/meta.ts";
import { type HiveMonitorArgs, renderManifests } from "../../../component/index.ts";
import { startReceiver } from "../../alerts/receiver.ts";
import { retryOnConflict } from "../../cluster/conflict.ts";
import { guestApi, guestNetworkUp, untilApiAnswers } from "../../cluster/guest-client.ts";
import { GUEST_API_HOST, GUEST_API_PORT } from "../../cluster/guest-protocol.ts";
import { seedNode, setPodRunning, waitFor } from "../../cluster/testing.ts";
import { type Containerd, startContainerd } from "../../containers/containerd-harness.ts";
import { ctrRunArgs } from "../ctr-run-args.ts";
import { agentMemory } from "./agent-memory.ts";
import {
  addPhaseCommands,
  killedDuringOutage,
  type LifecycleResult,
  outageAndKill,
  readThenTerminate,
} from "./lifecycle.ts";

const run = promisify(execFile);
const NODE = "node-image";
const AGENT = "hive-agent";
const WORKLOAD = "web-app";
const TRAPPED = "/etc/hive-secret";
const work = "/tmp/hive-image-e2e";
const lifecycle = process.env.HIVE_IMAGE_LIFECYCLE === "1";
/** How long the agent idles before its memory is read: past its resolver threads' idle time. */
const IDLE_WAIT_MS = 15_000;
mkdirSync(work, { recursive: true });
const started = performance.now();
const timings: Record<string, number> = {};
/** The step under way: what a deadline failure names. */
let step = "start containerd";
const mark = (name: string, next: string) => {
  timings[name] = Math.round(performance.now() - started);
  console.log(`${name} after ${timings[name]} ms (at ${new Date().toISOString()})`);
  step = next;
};
const result: Record<string, unknown> = { timings };
const resultsFile = process.env.HIVE_RESULTS ?? "/hive-out/image-results.json";
const save = () => writeFileSync(resultsFile, JSON.stringify(result, null, 2));
/**
 * One deadline for the whole run, inside the host's: a stuck step ends the run with its name and
 * the agent's log instead of the host killing a silent guest. Every wait below is bounded by it.
 */
const deadlineMs = Number(process.env.HIVE_GUEST_DEADLINE_MS ?? 1_200_000);
const remaining = () => Math.max(1000, deadlineMs - (performance.now() - started));
/** Every command and request is bounded too: a hung `ctr` or socket must not outlast the run. */
const CALL_TIMEOUT_MS = 120_000;

/** The parts of the image build's record (scripts/build-image.ts) this run needs. */
interface ImageInfo {
  image: string;
  entrypoint: string[];
  cmd: string[];
  env: string[];
  workingDir: string;
}
// The API server on the host (its one forwarded address); the receiver and the agent's endpoints on 127.0.0.1.
const api = guestApi();
await guestNetworkUp();
const info = JSON.parse(readFileSync(process.env.HIVE_IMAGE_INFO ?? "", "utf8")) as ImageInfo;
/** One log file per run of the agent container (a restart starts the next). */
const agentLogs: string[] = [];
const readLogs = () =>
  agentLogs
    .filter((file) => existsSync(file))
    .map((file) => readFileSync(file, "utf8"))
    .join("");
let metricsUrl: string | undefined;
let cd: Containerd | undefined;
const ctr = async (args: string[]) =>
  (
    await run("/usr/bin/ctr", ["--address", cd?.socket ?? "", "--namespace", "k8s.io", ...args], {
      timeout: CALL_TIMEOUT_MS,
    })
  ).stdout;
const get = (url: string) => fetch(url, { signal: AbortSignal.timeout(CALL_TIMEOUT_MS) });
const deadline = setTimeout(() => {
  result.ok = false;
  result.error = `the guest's deadline of ${deadlineMs} ms passed during: ${step}`;
  finish().finally(() => process.exit(0));
}, deadlineMs);

async function finish(): Promise<void> {
  try {
    const log = readLogs();
    writeFileSync(join(resultsFile, "..", "agent.log"), log);
    result.agentLogTail = log.split("\n").slice(-40).join("\n");
  } catch {
    result.agentLogTail = "(no agent log)";
  }
  save();
  await ctr(["task", "kill", "-s", "SIGKILL", AGENT]).catch(() => undefined);
  await cd?.stop().catch(() => undefined);
}

try {
  cd = await startContainerd({ namespace: "k8s.io", startTimeoutMs: remaining() });
  mark("containerdStarted", "Hive installed, the workload container and `ctr run` of the agent");
  const rootfsDir = resolve(process.env.HIVE_IMAGE_ROOTFS ?? "");

  const kc = api.kubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const receiver = await startReceiver(0);

  // What `pulumi up` would create, from the component's own builders, applied by the real kubectl
  // on the host: the API server then enforces its RBAC and admission policies on the agent's requests.
  const args: HiveMonitorArgs = {
    image: info.image,
    callback: { url: receiver.url },
    runtimeSocket: cd.socket,
    spoolDir: join(work, "spool"),
    traps: [{ path: TRAPPED, match: { matchLabels: { security: "high" } } }],
  };
  await api.install(args);
  // The Node as its kubelet reports it (this guest's boot id): it owns the agent's HiveData.
  const bootId = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  await untilApiAnswers(core);
  await retryOnConflict(() => seedNode(core, NODE, bootId));
  // The same rendering the host applied: the DaemonSet's pod template and its Secrets.
  const objects = renderManifests(args);
  const daemonSet = objects.find((o) => o.kind === "DaemonSet") as unknown as {
    metadata: { namespace: string };
    spec: { template: { spec: Parameters<typeof ctrRunArgs>[0] } };
  };
  const namespace = daemonSet.metadata.namespace;

  // The workload: a real container holding the trapped file, and its Pod on this node.
  const rootfs = cd.makeRootfs("web", { [TRAPPED.slice(1)]: "s3cret\n" });
  if (lifecycle) addPhaseCommands(rootfs);
  await cd.start(WORKLOAD, rootfs);
  await core.createNamespacedPod({
    namespace: "default",
    body: {
      metadata: { name: "web", labels: { security: "high" } },
      spec: { nodeName: NODE, containers: [{ name: "app", image: "busybox" }] },
    },
  });
  await setPodRunning(core, "default", "web", {
    podIP: "10.2.0.1",
    containerIds: { app: `containerd://${WORKLOAD}` },
  });

  // The service-account volume the kubelet projects into every pod.
  const saDir = join(work, "serviceaccount");
  mkdirSync(saDir, { recursive: true });
  // A pod-bound token from the TokenRequest API: the agent's ServiceAccount, its Pod on this Node.
  writeFileSync(join(saDir, "token"), await api.agentToken(NODE, "hive-agent-x1"));
  writeFileSync(join(saDir, "ca.crt"), api.caPem);
  writeFileSync(join(saDir, "namespace"), namespace);

  const spec = ctrRunArgs(daemonSet.spec.template.spec, info, rootfsDir, AGENT, {
    fields: { "spec.nodeName": NODE, "metadata.name": "hive-agent-x1", "metadata.namespace": namespace },
    // The rendered Secrets (the callback URL's), as the kubelet reads them for secretKeyRef.
    secrets: Object.fromEntries(
      objects
        .filter((o) => o.kind === "Secret")
        .map((o) => [o.metadata.name, o.stringData as Record<string, string>]),
    ),
    serviceAccountDir: saDir,
    apiHost: GUEST_API_HOST,
    apiPort: GUEST_API_PORT,
  });
  for (const dir of spec.hostDirs) mkdirSync(dir, { recursive: true });
  result.capabilities = spec.capabilities;
  result.ctrArgs = spec.args;
  /** `ctr run` of the DaemonSet's container, as the kubelet starts it (and restarts it), until ready. */
  const startAgent = async (options: { ready?: boolean } = {}) => {
    const log = join(work, `agent-${agentLogs.length + 1}.log`);
    agentLogs.push(log);
    await ctr(["run", "-d", "--log-uri", `file://${log}`, ...spec.args]);
    const ready = options.ready ?? true;
    // Without the API server the agent is up (its endpoints answer) but not ready.
    const url = ready ? spec.readinessUrl : new URL("/healthz", spec.readinessUrl).href;
    await waitFor(
      async () => {
        const tasks = await ctr(["task", "ls"]);
        if (new RegExp(`^${AGENT}\\s+\\d+\\s+STOPPED`, "m").test(tasks)) throw new Error("the agent exited");
        return (await get(url).catch(() => undefined))?.status === 200;
      },
      {
        timeoutMs: remaining(),
        intervalMs: 1000,
        what: ready ? "agent ready (/readyz)" : "agent up (/healthz)",
      },
    );
  };
  await startAgent();
  mark("agentReady", "HiveData for the trapped file");
  result.readyz = await (await get(`${spec.readinessUrl}?verbose`)).text();

  const pid = new RegExp(`^${AGENT}\\s+(\\d+)\\s+RUNNING`, "m").exec(await ctr(["task", "ls"]))?.[1];
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  result.process = {
    capEff: /^CapEff:\s*(\S+)$/m.exec(status)?.[1],
    noNewPrivs: /^NoNewPrivs:\s*(\S+)$/m.exec(status)?.[1],
    seccomp: /^Seccomp:\s*(\S+)$/m.exec(status)?.[1],
    // mountinfo: id parent dev root mount-point options …; the container's own "/" must be ro.
    rootReadOnly: readFileSync(`/proc/${pid}/mountinfo`, "utf8")
      .split("\n")
      .map((line) => line.split(" "))
      .some((f) => f[4] === "/" && f[5]?.split(",").includes("ro")),
  };

  await waitFor(
    async () => {
      const list = (await custom.listClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural: PLURAL_DATA,
      })) as {
        items: unknown[];
      };
      return list.items.length > 0;
    },
    { timeoutMs: remaining(), intervalMs: 500, what: "HiveData for the trapped file" },
  );
  mark("trapResolved", "the trapped file in the kernel watch map");
  // HiveData exists before the loader has put it into the kernel's watch map: wait for the map.
  metricsUrl = new URL("/metrics", spec.readinessUrl).href;
  const watched = async () =>
    Number(/^hive_watched_files (\d+)$/m.exec(await (await get(metricsUrl ?? "")).text())?.[1] ?? 0);
  await waitFor(async () => (await watched()) >= 2, {
    timeoutMs: remaining(),
    intervalMs: 500,
    what: "the trapped file and its directory in the kernel watch map (hive_watched_files)",
  });
  mark("trapWatched", "the alert at the callback");

  await cd.exec(WORKLOAD, ["/bin/busybox", "cat", TRAPPED]);
  const alert = await waitFor(() => receiver.accepted[0], {
    // Emulated CPUs shared by several guests: generous, since only a missing alert should fail.
    timeoutMs: remaining(),
    intervalMs: 200,
    what: "the alert at the callback",
  });
  mark("alerted", "the idle agent's memory");
  result.alert = JSON.parse(alert.body);
  // Idle: nothing to resolve or deliver, and past the resolver threads' idle time (10 s).
  await new Promise((r) => setTimeout(r, IDLE_WAIT_MS));
  result.memory = agentMemory(Number(pid), await (await get(metricsUrl ?? "")).text());
  mark("memorySampled", "hive status and SIGTERM");

  const statusJson = await ctr([
    "task",
    "exec",
    "--exec-id",
    "status",
    AGENT,
    ...info.entrypoint,
    "status",
    "--json",
  ]);
  result.status = JSON.parse(statusJson);

  const terminate = async () => {
    await ctr(["task", "kill", "-s", "SIGTERM", AGENT]);
    await waitFor(async () => /STOPPED/.test(await ctr(["task", "ls"])), {
      timeoutMs: Math.min(60_000, remaining()),
      intervalMs: 500,
      what: "the agent to stop on SIGTERM",
    });
  };
  if (lifecycle) {
    const outcome: Partial<LifecycleResult> = {};
    result.lifecycle = outcome;
    const context = {
      api,
      coordination: kc.makeApiClient(CoordinationV1Api),
      namespace,
      receiver,
      exec: (args: string[]) => cd?.exec(WORKLOAD, args) ?? Promise.reject(new Error("no containerd")),
      workloadId: WORKLOAD,
      ctr,
      agentId: AGENT,
      trapped: TRAPPED,
      readinessUrl: spec.readinessUrl,
      metricsUrl,
      startAgent,
      agentLog: readLogs,
      remaining,
      mark,
    };
    mark("lifecycleStarted", "the API server down for 60 s");
    await outageAndKill(context, outcome);
    await killedDuringOutage(context, outcome);
    await readThenTerminate(context, outcome, terminate);
  } else {
    await terminate();
  }
  mark("agentStopped", "done");
  // Whether every request of the agent passed the rendered RBAC and admission policies, the host
  // reads from the API server's audit log.
  result.ok = true;
  await receiver.close();
} catch (error) {
  result.ok = false;
  // The agent's own counters say where an alert stopped.
  result.metrics = await get(metricsUrl ?? "http://invalid/")
    .then(async (r) => (await r.text()).split("\n").filter((l) => l.startsWith("hive_")))
    .catch((e: unknown) => String(e));
  result.error = error instanceof Error ? (error.stack ?? error.message) : String(error);
}
clearTimeout(deadline);
await finish();
process.exit(0);
