/**
 * `hive watch` — standalone mode: HivePolicy files instead of the Kubernetes API, the same
 * kernel program, the same alert pipeline (stdout JSON lines + callbacks) as the agent.
 * Runs until Ctrl-C / SIGTERM, then detaches: program unloaded, pins and the watch table
 * removed, alerts in flight delivered (bounded wait).
 */

import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import { HiveError } from "../../../api/errors.ts";
import { FORMATS } from "../../../api/formats.ts";
import { allowedFileFor } from "../../alerts/allowed-counts.ts";
import { type AlertPipeline, type AlertPipelineConfig, createAlertPipeline } from "../../alerts/index.ts";
import { containerdWritableDirs } from "../../discover/writable-layers.ts";
import { ATTACH_REQUESTS, type AttachRequest } from "../../kernel/contract.ts";
import { isOnBpffs, type LibbpfKernelWatcher, openKernelWatcher } from "../../kernel/index.ts";
import { createLogger, type Logger } from "../../log.ts";
import { createHiveMetrics, type HiveMetrics } from "../../metrics/index.ts";
import {
  CONTAINERD_SOCKET,
  type ContainerLister,
  openContainerLister,
} from "../../standalone/local-containers.ts";
import { assertNoProblems, readPolicyFiles } from "../../standalone/policy-files.ts";
import { type Standalone, type StandaloneOptions, startStandalone } from "../../standalone/standalone.ts";
import {
  CGROUP_ROOT,
  CONTAINERD_SNAPSHOTS,
  openStandaloneLayers,
  type StandaloneLayers,
} from "../../standalone/standalone-layers.ts";
import { liveWriterOf, STANDALONE_PIN_ROOT, watchTableFileFor } from "../../standalone/watch-table-file.ts";
import { type Command, parseCommandArgs, UsageError } from "../command.ts";
import { EXIT, type ExitCode } from "../exit-codes.ts";

/** Where `hive watch` keeps undelivered alerts by default (the agent's is /var/lib/hive/spool). */
export const WATCH_SPOOL_DIR = "/var/lib/hive/watch-spool";

const help = `Usage: hive watch --policy FILE… [--callback URL] [--spool DIR] [--attach auto|kprobe.multi|fentry|kprobe]

Standalone mode: watches the traps of HivePolicy files on this machine, with the same kernel
program and the same alerts as the in-cluster agent. A trap without \`match\` watches the
host's own path; a trap with \`match\` watches the path inside each matching running
container of the local containerd (container-name, namespace, pod and matchLabels are read
from the container's labels; ip never matches outside a cluster).

A trapped file stays watched when it is replaced (rename over it, as editors and sed -i do)
or deleted and created again: the kernel reports changes to its directory and the path is
resolved again. With create: true a missing file is created (empty, with mode).

Alerts are printed on stdout, one JSON document per line, and POSTed to the trap's callback
or to --callback. An alert the callback has not acknowledged waits in the spool directory
(bounded, 64 MiB) and is delivered after a restart when the callback was down meanwhile.
Containers are followed as they start and stop (containerd's event stream): a container
that starts later has its traps armed at once, one that stops is forgotten. If the stream
ends (containerd restarts), it is resubscribed and the containers re-listed; a runtime
without an event service is re-listed every 2 s. \`hive status\` shows which is in use.
A trap with \`match\` is also armed on the file in containerd's image layers (overlayfs
snapshotter, cgroup v2), so that a container is watched from its first instruction; an access
there is told to its container by cgroup, and one no trap selects is not alerted.

Logs are JSON lines on stderr; the line {"msg":"ready",…} says the traps
are armed. Ctrl-C or SIGTERM detaches cleanly; SIGHUP re-scans containers and paths.
Needs root (or CAP_BPF, CAP_PERFMON and CAP_SYS_RESOURCE) and a kernel with BTF.

Options:
  --policy FILE       HivePolicy YAML file (repeat for several; several documents per file)
  --callback URL      where alerts of traps without their own callback are POSTed
  --spool DIR         durable spool of alerts not yet delivered to a callback (default
                      ${WATCH_SPOOL_DIR}; created with mode 0700); one hive watch per directory
  --attach MODE       auto (default): the least-privileged way this kernel allows, in this
                      order: kprobe.multi (a BPF link; 5.18+ with fprobe), fentry (a BPF
                      trampoline; 5.5+), kprobe (perf_event_open; needs CAP_SYS_ADMIN where
                      kernel.perf_event_paranoid > 2, as on Debian and Ubuntu)
  --containerd SOCKET containerd socket for traps with match (default ${CONTAINERD_SOCKET})
  --no-containers     watch host paths only; do not ask containerd
  --image-layers DIR  containerd's overlayfs snapshots directory (default
                      ${CONTAINERD_SNAPSHOTS})
  --no-image-layers   arm traps with match in running containers only
  --cgroup-root DIR   the cgroup v2 filesystem (default ${CGROUP_ROOT})
  --pin-root DIR      bpffs directory for the maps (default ${STANDALONE_PIN_ROOT})
  --node-name NAME    alert node.name (default: this host's name)

Exit codes: 0 detached after Ctrl-C/SIGTERM · 1 invalid policy file · 2 usage ·
3 this kernel cannot run the program (not root, no BTF, no way to attach) ·
4 no trapped file could be resolved (and no trap waits for a container to start) ·
5 a policy file could not be read.`;

function readBootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    // Without procfs the alert still carries a kernel id, just not a comparable one.
    return "unknown";
  }
}

/** The pin root's parent is a mounted bpffs (pinning anywhere else cannot work). */
function onBpffs(pinRoot: string): boolean {
  try {
    return isOnBpffs(dirname(pinRoot));
  } catch {
    return false;
  }
}

/**
 * Two `hive watch` on one pin root would share (and overwrite) one kernel map. A table left
 * by a process that is gone is stale: its pins are adopted and replaced.
 */
async function refuseSecondWatch(pinRoot: string): Promise<void> {
  const pid = await liveWriterOf(watchTableFileFor(pinRoot));
  if (pid === undefined) return;
  throw new HiveError("ConfigInvalid", `another hive watch (pid ${pid}) already uses this pin root`, {
    object: pinRoot,
    hint: "stop it first, or give this one its own bpffs directory with --pin-root",
  });
}

function parseAttach(value: string | undefined): AttachRequest {
  const request = (value ?? "auto") as AttachRequest;
  if (ATTACH_REQUESTS.includes(request)) return request;
  throw new UsageError(`--attach must be one of ${ATTACH_REQUESTS.join(", ")}, not "${value}"`);
}

function parseCallback(value: string | undefined): string | undefined {
  // The same check as a trap's `callback` field (api/formats.ts).
  if (value !== undefined && !FORMATS["http-url"]?.(value)) {
    throw new UsageError(`--callback must be an http(s) URL, not "${value}"`);
  }
  return value;
}

/** The alert pipeline options that come from the command line (tested without a kernel). */
export function watchPipelineOptions(values: {
  callback?: string | undefined;
  spool?: string | undefined;
}): Pick<AlertPipelineConfig, "defaultCallback" | "spool"> {
  const defaultCallback = parseCallback(values.callback);
  if (values.spool !== undefined && values.spool.trim() === "") {
    throw new UsageError("--spool needs a directory");
  }
  return {
    ...(defaultCallback === undefined ? {} : { defaultCallback }),
    // Alerts the callback has not acknowledged survive a restart of `hive watch`.
    spool: { dir: values.spool ?? WATCH_SPOOL_DIR },
  };
}

/** Resolves on the first SIGINT/SIGTERM; a second one ends the process at once (exit 130). */
function untilSignal(onHangup: () => void): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) process.exit(130);
      stopping = true;
      resolve(signal);
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
    process.on("SIGHUP", onHangup);
  });
}

const WATCH_OPTIONS = {
  policy: { type: "string", multiple: true },
  callback: { type: "string" },
  spool: { type: "string" },
  attach: { type: "string" },
  containerd: { type: "string" },
  "no-containers": { type: "boolean" },
  "image-layers": { type: "string" },
  "no-image-layers": { type: "boolean" },
  "cgroup-root": { type: "string" },
  "pin-root": { type: "string" },
  "node-name": { type: "string" },
} satisfies Parameters<typeof parseCommandArgs>[1];

type WatchValues = ReturnType<typeof parseCommandArgs<typeof WATCH_OPTIONS>>["values"];

/** `hive watch`'s command line, checked before anything is opened. */
interface WatchArgs {
  files: string[];
  attachMode: AttachRequest;
  pipelineOptions: Pick<AlertPipelineConfig, "defaultCallback" | "spool">;
  pinRoot: string;
  values: WatchValues;
}

/** What `hive watch` opened before its engine starts; stopAll closes it. */
interface Opened {
  logger: Logger;
  kernelId: string;
  watcher: LibbpfKernelWatcher;
  /** Whether the maps are pinned (a bpffs is mounted): `hive status` sees only pinned maps. */
  pinned: boolean;
  metrics: HiveMetrics;
  alerts: AlertPipeline;
  lister: ContainerLister | undefined;
  layers: StandaloneLayers | undefined;
}

function parseWatchArgs(args: string[]): WatchArgs {
  const { values } = parseCommandArgs(args, WATCH_OPTIONS, false);
  const files = values.policy ?? [];
  if (files.length === 0) throw new UsageError("watch needs at least one --policy FILE");
  return {
    files,
    attachMode: parseAttach(values.attach),
    pipelineOptions: watchPipelineOptions(values),
    pinRoot: values["pin-root"] ?? STANDALONE_PIN_ROOT,
    values,
  };
}

function assertRoot(): void {
  if (process.getuid?.() === 0) return;
  throw new HiveError("PermissionDenied", "hive watch loads a BPF program into the kernel", {
    object: `uid ${process.getuid?.()}`,
    hint: "run it as root (sudo), or with CAP_BPF, CAP_PERFMON and CAP_SYS_RESOURCE",
  });
}

/** The kernel program loaded, its maps pinned when a bpffs is mounted; the alert pipeline; containerd. */
async function openAll(watch: WatchArgs): Promise<Opened> {
  const logger = createLogger({ component: "hive-watch" });
  const kernelId = readBootId();
  const { watcher, pinned } = await openKernel(watch, logger);
  const metrics = createHiveMetrics({ processMetrics: false });
  const alerts = await createAlertPipeline({
    logger,
    metrics,
    ancestors: (process) => watcher.ancestors(process),
    ...watch.pipelineOptions,
    // What the allow lists let through, for `hive status` (only with pinned maps: status reads those).
    ...(pinned ? { allowedFile: allowedFileFor(watch.pinRoot) } : {}),
  });
  // With a spool, events keep their ring space until their alerts are on disk or delivered.
  watcher.gateRelease(alerts.ringGate());
  const { lister, layers } = await openContainers(watch.values, watcher, logger);
  return { logger, kernelId, watcher, pinned, metrics, alerts, lister, layers };
}

async function openKernel(
  watch: WatchArgs,
  logger: Logger,
): Promise<{ watcher: LibbpfKernelWatcher; pinned: boolean }> {
  const { pinRoot } = watch;
  // Without a mounted bpffs nothing can be pinned: run unpinned (only `hive status` is blind to it).
  const pinned = onBpffs(pinRoot);
  if (!pinned) {
    logger.warn(
      "no BPF filesystem mounted; running without pinned maps, so `hive status` cannot see this watch",
      {
        pinRoot,
        hint: "mount it with: mount -t bpf bpf /sys/fs/bpf",
      },
    );
  }
  if (pinned) await refuseSecondWatch(pinRoot);
  const watcher = openKernelWatcher({
    attachMode: watch.attachMode,
    pinRoot: pinned ? pinRoot : null,
    logger,
  });
  return { watcher, pinned };
}

/** containerd's containers and image layers, unless told not to ask it. */
async function openContainers(
  values: WatchValues,
  watcher: LibbpfKernelWatcher,
  logger: Logger,
): Promise<{ lister: ContainerLister | undefined; layers: StandaloneLayers | undefined }> {
  const lister = values["no-containers"]
    ? undefined
    : await openContainerLister({ socket: values.containerd });
  if (values.containerd !== undefined && lister === undefined) {
    logger.warn("no containerd socket; traps with match will match nothing", { socket: values.containerd });
  }
  const layers =
    lister && !values["no-image-layers"]
      ? openStandaloneLayers({
          snapshotsDir: values["image-layers"] ?? CONTAINERD_SNAPSHOTS,
          cgroupRoot: values["cgroup-root"] ?? CGROUP_ROOT,
          records: () => lister.records(),
          writable: containerdWritableDirs({ socket: values.containerd ?? CONTAINERD_SOCKET }),
          watcher,
          logger,
          explicit: values["image-layers"] !== undefined,
        })
      : undefined;
  // The layer files are planned at the start: only once containerd said which are images' layers.
  await layers?.ready;
  return { lister, layers };
}

function standaloneOptions(
  watch: WatchArgs,
  documents: StandaloneOptions["documents"],
  opened: Opened,
): StandaloneOptions {
  const { lister, layers, metrics } = opened;
  const { defaultCallback } = watch.pipelineOptions;
  const nodeName = watch.values["node-name"];
  return {
    documents,
    watcher: opened.watcher,
    alerts: opened.alerts,
    logger: opened.logger,
    kernelId: opened.kernelId,
    ...(opened.pinned ? { watchTableFile: watchTableFileFor(watch.pinRoot) } : {}),
    ...(lister ? { listContainers: () => lister.list(), containerEvents: lister.events() } : {}),
    ...(layers ? { imageLayers: layers } : {}),
    onEventDropped: (reason) => metrics.kernelEventsDropped.inc({ reason }),
    ...(nodeName === undefined ? {} : { nodeName }),
    ...(defaultCallback === undefined ? {} : { defaultCallback }),
  };
}

async function stopAll(opened: Opened): Promise<void> {
  opened.layers?.close();
  opened.lister?.close();
  await opened.alerts.close({ drainMs: 5000 });
  await opened.watcher.close();
}

/** Runs until SIGINT/SIGTERM (SIGHUP re-plans), then detaches: the engine first, then what was opened. */
async function serveUntilSignal(watch: WatchArgs, opened: Opened, standalone: Standalone): Promise<ExitCode> {
  const { logger, watcher, kernelId } = opened;
  const signal = untilSignal(() => void standalone.replan("SIGHUP"));
  opened.layers?.onChange(() => void standalone.layersChanged());
  logger.info("ready", {
    attachMode: watcher.attachMode,
    attachReason: watcher.attachReason,
    pinRoot: watch.pinRoot,
    watching: standalone.plan.files.length,
    notWatched: standalone.plan.unresolved.length + standalone.plan.unmatched.length,
    kernelId,
  });
  const received = await signal;
  logger.info("detaching", { signal: received });
  await standalone.close();
  const counters = watcher.counters();
  await stopAll(opened);
  logger.info("detached", { events: counters.delivered, lost: counters.lost });
  return EXIT.ok;
}

export const watchCommand: Command = {
  help,
  async run(args) {
    const watch = parseWatchArgs(args);
    const policies = await readPolicyFiles(watch.files);
    assertNoProblems(policies);
    assertRoot();
    const opened = await openAll(watch);
    let standalone: Standalone;
    try {
      standalone = await startStandalone(standaloneOptions(watch, policies.documents, opened));
    } catch (error) {
      await stopAll(opened);
      throw error;
    }
    return serveUntilSignal(watch, opened, standalone);
  },
};
