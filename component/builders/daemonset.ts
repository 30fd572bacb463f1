/**
 * The agent DaemonSet: one agent per node, with exactly the privileges its jobs need.
 * Not `privileged: true`: the container drops every capability and adds back these.
 *
 *   BPF             bpf(): load the program, create and update maps (kernel ≥ 5.8).
 *   PERFMON         tracing programs and their BPF links (kprobe.multi, fentry), and
 *                   bpf_probe_read_kernel in the program (≥ 5.8). The agent picks the link per
 *                   kernel (runtime/kernel/attach.ts): neither needs perf_event_open.
 *   SYS_RESOURCE    raise RLIMIT_MEMLOCK: kernels before 5.11 charge BPF maps to memlock, not memcg.
 *   SYS_PTRACE      open /proc/PID/root of containers' processes (ptrace access check; hostPID).
 *   DAC_READ_SEARCH walk and stat trap paths inside containers whatever their owners and modes.
 *   CHOWN, FOWNER   `create: true`: give the created file the container root's owner and the trap's mode.
 *   SYS_ADMIN       only with `legacyKernelCapabilities`: kernels before 5.8 have no BPF/PERFMON and
 *                   demand SYS_ADMIN for both syscalls; kernels with neither kprobe.multi links nor
 *                   BPF trampolines can attach only a perf-event kprobe, and Debian's and Ubuntu's
 *                   perf_event_paranoid patch (3, resp. 4) reserves perf_event_open to SYS_ADMIN.
 *
 * Not granted: DAC_OVERRIDE, so `create: true` cannot write into a container directory that its
 * owner's mode forbids to root's uid (user-namespaced pods); the trap reports that in its status.
 */

import { ARCHITECTURES } from "../../api/architecture.ts";
import { AGENT_SELECTOR } from "../../api/meta.ts";
import type { HiveConfig } from "../config.ts";
import { CALLBACK_CHECKSUM_ANNOTATION, callbackChecksum, callbackSecretRef } from "./callback-secret.ts";
import { AGENT_NAME, hiveLabels, type KubernetesObject } from "./objects.ts";

export const AGENT_CAPABILITIES = [
  "BPF",
  "PERFMON",
  "SYS_RESOURCE",
  "SYS_PTRACE",
  "DAC_READ_SEARCH",
  "CHOWN",
  "FOWNER",
];
export const LEGACY_KERNEL_CAPABILITIES = ["SYS_ADMIN"];

/** Where the host's paths appear inside the agent's container. */
export const MOUNTS = {
  bpffs: "/sys/fs/bpf",
  btf: "/sys/kernel/btf",
  /** The runtime socket's directory, so a restarted containerd's new socket is seen (a file bind would go stale). */
  runtimeDir: "/host/run/container-runtime",
  spool: "/var/lib/hive/spool",
  /** The watch table naming the loader's kernel slots, read by `hive status` on the node (host tmpfs). */
  watchTables: "/run/hive",
  tmp: "/tmp",
  /** containerd's root (read-only): its overlayfs snapshots are the image layers traps are armed in. */
  containerdRoot: "/host/var/lib/containerd",
  /** The host's cgroup tree (read-only): an access's container is found by its cgroup id. */
  cgroup: "/host/sys/fs/cgroup",
  /** The host's securityfs (read-only): its `lsm` file says whether the BPF LSM can deny. */
  securityfs: "/host/sys/kernel/security",
} as const;

/** containerd's overlayfs snapshots under its root. */
export const OVERLAYFS_SNAPSHOTS = "io.containerd.snapshotter.v1.overlayfs/snapshots";

/** Nodes the agent can run on: Linux (and one of AGENT_ARCHITECTURES, by node affinity). */
export const AGENT_NODE_SELECTOR = { "kubernetes.io/os": "linux" } as const;

/**
 * The node architectures the image and the kernel program are built for (one object each,
 * runtime/kernel/architecture.ts): elsewhere the kprobe would read the wrong registers, and the
 * image has no build to pull.
 */
export const AGENT_ARCHITECTURES: readonly string[] = Object.values(ARCHITECTURES).map((a) => a.kubernetes);

type Affinity = NonNullable<HiveConfig["affinity"]>;
type NodeSelectorTerm = NonNullable<
  NonNullable<
    NonNullable<Affinity["nodeAffinity"]>["requiredDuringSchedulingIgnoredDuringExecution"]
  >["nodeSelectorTerms"]
>[number];

/**
 * The given affinity with `kubernetes.io/arch In AGENT_ARCHITECTURES` added to every required
 * node selector term (terms are alternatives: each must carry it), or as the only term. A
 * nodeSelector cannot say "one of".
 */
export function agentAffinity(given: HiveConfig["affinity"]): Affinity {
  const archRequirement = { key: "kubernetes.io/arch", operator: "In", values: [...AGENT_ARCHITECTURES] };
  const nodeAffinity = given?.nodeAffinity ?? {};
  const required = nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution;
  const terms: NodeSelectorTerm[] = required?.nodeSelectorTerms?.length ? required.nodeSelectorTerms : [{}];
  return {
    ...given,
    nodeAffinity: {
      ...nodeAffinity,
      requiredDuringSchedulingIgnoredDuringExecution: {
        ...required,
        nodeSelectorTerms: terms.map((term) => ({
          ...term,
          matchExpressions: [...(term.matchExpressions ?? []), archRequirement],
        })),
      },
    },
  };
}

/** The DaemonSet's selector (api/meta.ts: the pods role selects the agent's pods by it too). */
export { AGENT_SELECTOR };

function dirname(path: string): string {
  const dir = path.replace(/\/+$/, "").replace(/\/[^/]*$/, "");
  return dir === "" ? "/" : dir;
}

function basename(path: string): string {
  return path.replace(/\/+$/, "").replace(/^.*\//, "");
}

/** The agent's command line (the image's entrypoint is `node dist/agent/hive.mjs`). */
export function agentArgs(config: HiveConfig): string[] {
  const args = [
    "agent",
    "--log-level",
    config.logLevel,
    "--metrics-port",
    String(config.metricsPort),
    "--spool-dir",
    MOUNTS.spool,
    "--runtime-socket",
    `${MOUNTS.runtimeDir}/${basename(config.runtimeSocket)}`,
    // The host's active LSMs: the BPF LSM denies where it is one of them.
    "--lsm-file",
    `${MOUNTS.securityfs}/lsm`,
    // Gone or being deleted when the agent stops: an uninstall, and the kernel program goes too.
    "--daemonset",
    AGENT_NAME,
  ];
  if (config.containerdRoot)
    args.push(
      "--image-layers",
      `${MOUNTS.containerdRoot}/${OVERLAYFS_SNAPSHOTS}`,
      "--cgroup-root",
      MOUNTS.cgroup,
    );
  if (config.sharedKernels) args.push("--shared-kernels");
  for (const prefix of config.tenantCallbacks) args.push("--tenant-callback", prefix);
  if (config.clusterName) args.push("--cluster-name", config.clusterName);
  if (!config.reports) args.push("--reports", "none");
  else {
    if (config.reports.format !== "policyreport") args.push("--reports", config.reports.format);
    if (config.reports.failWindowHours !== undefined)
      args.push("--report-fail-window", String(config.reports.failWindowHours));
  }
  // The callback URL itself comes from a Secret (HIVE_CALLBACK, see daemonSetManifest), never from here.
  const cb = config.callback;
  if (cb) {
    if (cb.format && cb.format !== "json") args.push("--callback-format", cb.format);
    if (cb.headersSecret) args.push("--callback-headers-secret", cb.headersSecret);
    if (cb.signingSecret)
      args.push(
        "--callback-signing-secret",
        cb.signingSecret.name,
        "--callback-signing-key",
        cb.signingSecret.key,
      );
  }
  return args;
}

function fieldEnv(name: string, fieldPath: string) {
  return { name, valueFrom: { fieldRef: { fieldPath } } };
}

export function daemonSetManifest(config: HiveConfig): KubernetesObject {
  const labels = { ...hiveLabels("agent"), ...AGENT_SELECTOR };
  const annotations = podAnnotations(config);
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: AGENT_NAME, namespace: config.namespace, labels },
    spec: {
      selector: { matchLabels: AGENT_SELECTOR },
      updateStrategy: config.updateStrategy,
      template: {
        metadata: {
          // Hive's labels last: the selector's must stay (config.ts rejects pod labels that would change them).
          labels: { ...config.podLabels, ...labels },
          ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
        },
        spec: podSpec(config),
      },
    },
  };
}

/** The user's pod annotations, and the callback URL's checksum: a new URL restarts the agents. */
function podAnnotations(config: HiveConfig): Record<string, string> {
  const checksum = callbackChecksum(config.callback);
  return {
    ...config.podAnnotations,
    ...(checksum === undefined ? {} : { [CALLBACK_CHECKSUM_ANNOTATION]: checksum }),
  };
}

function podSpec(config: HiveConfig): Record<string, unknown> {
  return {
    serviceAccountName: AGENT_NAME,
    automountServiceAccountToken: true,
    // /proc/PID/root of every container's processes: the trap paths are resolved there.
    hostPID: true,
    // Linux nodes of an architecture the program is built for; the agent refuses to start
    // elsewhere (config.ts rejects a nodeSelector for another).
    nodeSelector: { ...config.nodeSelector, ...AGENT_NODE_SELECTOR },
    affinity: agentAffinity(config.affinity),
    tolerations: config.tolerations,
    ...(config.priorityClassName ? { priorityClassName: config.priorityClassName } : {}),
    ...(config.imagePullSecrets.length > 0
      ? { imagePullSecrets: config.imagePullSecrets.map((name) => ({ name })) }
      : {}),
    securityContext: { seccompProfile: { type: "RuntimeDefault" } },
    terminationGracePeriodSeconds: 30,
    containers: [agentContainer(config)],
    volumes: agentVolumes(config),
  };
}

function agentContainer(config: HiveConfig) {
  return {
    name: "agent",
    image: config.image,
    imagePullPolicy: config.imagePullPolicy,
    args: agentArgs(config),
    env: agentEnv(config),
    ports: [{ name: "metrics", containerPort: config.metricsPort, protocol: "TCP" }],
    // Loading and verifying the BPF program can take a while on a busy node; liveness waits for it.
    startupProbe: probe("/healthz", 30),
    livenessProbe: probe("/healthz", 12),
    readinessProbe: probe("/readyz", 3),
    resources: config.resources,
    securityContext: containerSecurityContext(config),
    volumeMounts: agentVolumeMounts(config),
  };
}

function agentEnv(config: HiveConfig) {
  const callbackRef = callbackSecretRef(config.callback);
  return [
    fieldEnv("NODE_NAME", "spec.nodeName"),
    fieldEnv("POD_NAME", "metadata.name"),
    fieldEnv("POD_NAMESPACE", "metadata.namespace"),
    // Resolved by the kubelet: the agent needs no permission on this Secret.
    ...(callbackRef ? [{ name: "HIVE_CALLBACK", valueFrom: { secretKeyRef: callbackRef } }] : []),
  ];
}

/**
 * Liveness restarts the agent only when it is stuck (two minutes without an answer): a restart
 * drops what it holds in memory (accesses waiting for their pod's name), and a starved node can
 * hold the agent's event loop for over a minute (75 s seen on an emulated node under load).
 * Readiness, which only gates a rollout, reacts within 30 s.
 */
function probe(path: string, failureThreshold: number) {
  return {
    httpGet: { path, port: "metrics" },
    periodSeconds: 10,
    timeoutSeconds: 5,
    failureThreshold,
  };
}

/** Not privileged: every capability dropped but the agent's (see the top of this file). */
function containerSecurityContext(config: HiveConfig) {
  const capabilities = [
    ...AGENT_CAPABILITIES,
    ...(config.legacyKernelCapabilities ? LEGACY_KERNEL_CAPABILITIES : []),
  ];
  return {
    privileged: false,
    // Kubernetes refuses allowPrivilegeEscalation: false together with SYS_ADMIN.
    ...(config.legacyKernelCapabilities ? {} : { allowPrivilegeEscalation: false }),
    readOnlyRootFilesystem: true,
    runAsUser: 0,
    runAsGroup: 0,
    capabilities: { drop: ["ALL"], add: capabilities },
    // The runtime's default AppArmor profile denies writes under /sys/fs other than cgroup,
    // which pinning maps in the BPF filesystem needs. Seccomp stays RuntimeDefault (pod level):
    // it allows bpf() and perf_event_open() to holders of CAP_BPF / CAP_PERFMON.
    appArmorProfile: { type: "Unconfined" },
  };
}

/** Where the pod's volumes (agentVolumes, same names) appear in the container. */
function agentVolumeMounts(config: HiveConfig) {
  return [
    // HostToContainer: a BPF filesystem the host mounts later is seen; Bidirectional would need privileged.
    { name: "bpffs", mountPath: MOUNTS.bpffs, mountPropagation: "HostToContainer" },
    { name: "btf", mountPath: MOUNTS.btf, readOnly: true },
    { name: "securityfs", mountPath: MOUNTS.securityfs, readOnly: true },
    // Read-only is enough to connect to a socket (write permission on sockets ignores read-only mounts).
    { name: "container-runtime", mountPath: MOUNTS.runtimeDir, readOnly: true },
    { name: "spool", mountPath: MOUNTS.spool },
    { name: "watch-tables", mountPath: MOUNTS.watchTables },
    { name: "tmp", mountPath: MOUNTS.tmp },
    ...(config.containerdRoot
      ? [
          { name: "containerd-root", mountPath: MOUNTS.containerdRoot, readOnly: true },
          { name: "cgroup", mountPath: MOUNTS.cgroup, readOnly: true },
        ]
      : []),
  ];
}

/** The host's paths the agent works with, and its scratch space. */
function agentVolumes(config: HiveConfig) {
  return [
    { name: "bpffs", hostPath: { path: "/sys/fs/bpf", type: "Directory" } },
    { name: "btf", hostPath: { path: "/sys/kernel/btf", type: "Directory" } },
    // Only the list of active LSMs is read; the directory exists wherever sysfs does.
    { name: "securityfs", hostPath: { path: "/sys/kernel/security", type: "Directory" } },
    { name: "container-runtime", hostPath: { path: dirname(config.runtimeSocket), type: "Directory" } },
    { name: "spool", hostPath: { path: config.spoolDir, type: "DirectoryOrCreate" } },
    // The host's /run/hive: `sudo hive status` on the node finds the agent's table where it finds
    // `hive watch`'s; /run is a tmpfs, so the table goes with the kernel state at reboot.
    { name: "watch-tables", hostPath: { path: MOUNTS.watchTables, type: "DirectoryOrCreate" } },
    { name: "tmp", emptyDir: { sizeLimit: "64Mi" } },
    ...(config.containerdRoot
      ? [
          // Made empty where it is missing: a node whose containerd keeps its root elsewhere still
          // runs the agent, which finds that out from containerd and says where it is.
          { name: "containerd-root", hostPath: { path: config.containerdRoot, type: "DirectoryOrCreate" } },
          { name: "cgroup", hostPath: { path: "/sys/fs/cgroup", type: "Directory" } },
        ]
      : []),
  ];
}
