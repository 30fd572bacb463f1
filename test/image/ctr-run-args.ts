/**
 * Turns the rendered DaemonSet's pod template into the `ctr run` command that starts its
 * container the way the kubelet would through CRI: the image's entrypoint with the
 * container's args appended, the downward-API and Secret environment, the security context
 * (capabilities, no-new-privileges, read-only root, user, seccomp), the host PID namespace,
 * every volume, and the service-account token that the kubelet projects. Every field of the
 * spec is either translated or rejected here, so a field added to the DaemonSet makes the
 * image test fail until it is honoured — the spec is never copied by hand.
 *
 * One deliberate difference: the container joins the host's network namespace (no CNI in
 * the test VM); the agent reaches the API server at the guest's forwarded address and the
 * callback receiver on 127.0.0.1.
 */

export interface PodValues {
  /** Values of the downward API's fieldRef paths (spec.nodeName, metadata.name, …). */
  fields: Record<string, string>;
  /** The Secrets of the pod's namespace, by name and key, for secretKeyRef entries (the callback URL). */
  secrets?: Record<string, Record<string, string>>;
  /** Host directory holding token, ca.crt and namespace, mounted where the kubelet mounts them. */
  serviceAccountDir: string;
  /** KUBERNETES_SERVICE_HOST / _PORT, as the kubelet sets them. */
  apiHost: string;
  apiPort: number;
  /** Host directory backing each emptyDir volume, by volume name is not needed: tmpfs is used. */
}

/** The image's config (OCI): what the runtime applies before the pod spec. */
export interface ImageConfig {
  entrypoint: string[];
  cmd: string[];
  env: string[];
  workingDir: string;
}

interface Container {
  name: string;
  image: string;
  args?: string[];
  command?: string[];
  env?: Array<{
    name: string;
    value?: string;
    valueFrom?: { fieldRef?: { fieldPath: string }; secretKeyRef?: { name: string; key: string } };
  }>;
  securityContext?: Record<string, unknown>;
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean; mountPropagation?: string }>;
  [key: string]: unknown;
}

interface PodSpec {
  containers: Container[];
  volumes?: Array<{
    name: string;
    hostPath?: { path: string; type?: string };
    emptyDir?: { sizeLimit?: string };
  }>;
  hostPID?: boolean;
  securityContext?: { seccompProfile?: { type: string } };
  automountServiceAccountToken?: boolean;
  [key: string]: unknown;
}

/** Every Linux capability (include/uapi/linux/capability.h, 0–40): "drop ALL" drops each of these. */
const ALL_CAPABILITIES = [
  "CHOWN",
  "DAC_OVERRIDE",
  "DAC_READ_SEARCH",
  "FOWNER",
  "FSETID",
  "KILL",
  "SETGID",
  "SETUID",
  "SETPCAP",
  "LINUX_IMMUTABLE",
  "NET_BIND_SERVICE",
  "NET_BROADCAST",
  "NET_ADMIN",
  "NET_RAW",
  "IPC_LOCK",
  "IPC_OWNER",
  "SYS_MODULE",
  "SYS_RAWIO",
  "SYS_CHROOT",
  "SYS_PTRACE",
  "SYS_PACCT",
  "SYS_ADMIN",
  "SYS_BOOT",
  "SYS_NICE",
  "SYS_RESOURCE",
  "SYS_TIME",
  "SYS_TTY_CONFIG",
  "MKNOD",
  "LEASE",
  "AUDIT_WRITE",
  "AUDIT_CONTROL",
  "SETFCAP",
  "MAC_OVERRIDE",
  "MAC_ADMIN",
  "SYSLOG",
  "WAKE_ALARM",
  "BLOCK_SUSPEND",
  "AUDIT_READ",
  "PERFMON",
  "BPF",
  "CHECKPOINT_RESTORE",
] as const;

/** The capability bit mask a process in the container must have: CapEff in /proc/PID/status. */
export function capabilityMask(names: readonly string[]): bigint {
  let mask = 0n;
  for (const name of names) {
    const bit = ALL_CAPABILITIES.indexOf(name as (typeof ALL_CAPABILITIES)[number]);
    if (bit < 0) throw new Error(`unknown capability ${name}`);
    mask |= 1n << BigInt(bit);
  }
  return mask;
}

// Fields that change nothing about how the container runs on one node, or that the test
// checks otherwise (probes are polled by the test itself, ports are on the host network).
const CONTAINER_FIELDS_NOT_RUN = new Set(["name", "image", "imagePullPolicy", "ports", "resources"]);
const PROBES = new Set(["startupProbe", "livenessProbe", "readinessProbe"]);
const POD_FIELDS_NOT_RUN = new Set([
  "serviceAccountName",
  "nodeSelector",
  // Where the scheduler may place the pod (the node's architecture): nothing the container runs with.
  "affinity",
  "tolerations",
  "priorityClassName",
  "imagePullSecrets",
  "terminationGracePeriodSeconds",
]);

export interface CtrRun {
  /** Arguments after `ctr run` (options, image reference, container id, process args). */
  args: string[];
  /** Host directories that must exist first (hostPath volumes of type Directory[OrCreate]). */
  hostDirs: string[];
  /** Capabilities the container's processes get. */
  capabilities: string[];
  /** The container's /readyz URL on the host network. */
  readinessUrl: string;
}

/**
 * The `ctr run` arguments for the first container of `podSpec`, started from the image's
 * unpacked filesystem `rootfs` (the same files `ctr images import` would unpack, without
 * minutes of decompression under emulation), so the image config is applied here as the
 * runtime would: its environment first (the pod's entries win), its working directory.
 */
export function ctrRunArgs(
  podSpec: PodSpec,
  image: ImageConfig,
  rootfs: string,
  id: string,
  pod: PodValues,
): CtrRun {
  for (const key of Object.keys(podSpec)) {
    if (
      ![
        "containers",
        "volumes",
        "hostPID",
        "securityContext",
        "automountServiceAccountToken",
        ...POD_FIELDS_NOT_RUN,
      ].includes(key)
    ) {
      throw new Error(`the pod spec's ${key} is not translated into the container run`);
    }
  }
  if (podSpec.containers.length !== 1) throw new Error("expected exactly one container");
  const c = podSpec.containers[0] as Container;
  const opts: string[] = ["--cwd", image.workingDir || "/"];
  for (const e of image.env) opts.push("--env", e);
  for (const key of Object.keys(c)) {
    if (
      CONTAINER_FIELDS_NOT_RUN.has(key) ||
      PROBES.has(key) ||
      ["args", "command", "env", "securityContext", "volumeMounts"].includes(key)
    )
      continue;
    throw new Error(`the container's ${key} is not translated into the container run`);
  }

  // Kubernetes: `command` replaces the entrypoint, `args` replaces CMD; ctr replaces both.
  const process = [...(c.command ?? image.entrypoint), ...(c.args ?? (c.command ? [] : image.cmd))];

  for (const e of c.env ?? []) {
    const secretRef = e.valueFrom?.secretKeyRef;
    const value =
      e.value ??
      (e.valueFrom?.fieldRef ? pod.fields[e.valueFrom.fieldRef.fieldPath] : undefined) ??
      (secretRef ? pod.secrets?.[secretRef.name]?.[secretRef.key] : undefined) ??
      (() => {
        throw new Error(`env ${e.name}: no value for ${JSON.stringify(e.valueFrom)}`);
      })();
    opts.push("--env", `${e.name}=${value}`);
  }

  const sc = c.securityContext ?? {};
  const capabilities: string[] = [];
  for (const [key, value] of Object.entries(sc)) {
    switch (key) {
      case "privileged":
        if (value === true) opts.push("--privileged");
        break;
      case "allowPrivilegeEscalation":
        break; // below: ctr sets no_new_privs unless told otherwise
      case "readOnlyRootFilesystem":
        if (value === true) opts.push("--read-only");
        break;
      case "runAsUser":
        break; // with runAsGroup below
      case "runAsGroup":
        break;
      case "capabilities": {
        const caps = value as { drop?: string[]; add?: string[] };
        if (!caps.drop?.includes("ALL")) throw new Error("only capabilities.drop: [ALL] is translated");
        capabilities.push(...(caps.add ?? []));
        // ctr applies additions before drops: drop every capability the spec does not add.
        for (const cap of ALL_CAPABILITIES)
          if (!capabilities.includes(cap)) opts.push("--cap-drop", `CAP_${cap}`);
        for (const cap of capabilities) opts.push("--cap-add", `CAP_${cap}`);
        break;
      }
      case "appArmorProfile":
        // Unconfined: ctr applies no AppArmor profile unless asked.
        if ((value as { type: string }).type !== "Unconfined") throw new Error("only Unconfined AppArmor");
        break;
      default:
        throw new Error(`securityContext.${key} is not translated into the container run`);
    }
  }
  if (sc.allowPrivilegeEscalation !== false) opts.push("--allow-new-privs");
  // ctr 1.6 has no --user: a --rootfs container runs as 0:0, so only root can be expressed.
  if ((sc.runAsUser ?? 0) !== 0 || (sc.runAsGroup ?? 0) !== 0)
    throw new Error(`runAsUser/runAsGroup ${sc.runAsUser}:${sc.runAsGroup}: only 0:0 is translated`);

  const seccomp = podSpec.securityContext?.seccompProfile?.type;
  if (seccomp === "RuntimeDefault") opts.push("--seccomp");
  else if (seccomp !== undefined && seccomp !== "Unconfined") throw new Error(`seccomp ${seccomp}`);
  if (podSpec.hostPID) opts.push("--with-ns", "pid:/proc/1/ns/pid");
  opts.push("--net-host");

  const hostDirs: string[] = [];
  const volumes = new Map((podSpec.volumes ?? []).map((v) => [v.name, v]));
  for (const m of c.volumeMounts ?? []) {
    const v = volumes.get(m.name);
    if (!v) throw new Error(`volumeMount ${m.name} names no volume`);
    const propagation =
      m.mountPropagation === "HostToContainer" ? "rslave" : m.mountPropagation ? undefined : "rprivate";
    if (!propagation) throw new Error(`mountPropagation ${m.mountPropagation} is not translated`);
    if (v.hostPath) {
      if (v.hostPath.type === "DirectoryOrCreate" || v.hostPath.type === "Directory")
        hostDirs.push(v.hostPath.path);
      else throw new Error(`hostPath type ${v.hostPath.type} is not translated`);
      opts.push(
        "--mount",
        `type=bind,src=${v.hostPath.path},dst=${m.mountPath},options=rbind:${propagation}:${m.readOnly ? "ro" : "rw"}`,
      );
    } else if (v.emptyDir) {
      const size = v.emptyDir.sizeLimit ? `:size=${quantityBytes(v.emptyDir.sizeLimit)}` : "";
      opts.push("--mount", `type=tmpfs,src=tmpfs,dst=${m.mountPath},options=nosuid:nodev${size}`);
    } else {
      throw new Error(`volume ${m.name}: only hostPath and emptyDir are translated`);
    }
  }
  if (podSpec.automountServiceAccountToken !== false) {
    opts.push(
      "--mount",
      `type=bind,src=${pod.serviceAccountDir},dst=/var/run/secrets/kubernetes.io/serviceaccount,options=rbind:ro`,
      "--env",
      `KUBERNETES_SERVICE_HOST=${pod.apiHost}`,
      "--env",
      `KUBERNETES_SERVICE_PORT=${pod.apiPort}`,
    );
  }

  const probe = c.readinessProbe as { httpGet?: { path: string; port: string | number } } | undefined;
  const ports = (c.ports as Array<{ name?: string; containerPort: number }> | undefined) ?? [];
  const port =
    typeof probe?.httpGet?.port === "number"
      ? probe.httpGet.port
      : ports.find((p) => p.name === probe?.httpGet?.port)?.containerPort;
  if (!probe?.httpGet || port === undefined) throw new Error("the readiness probe names no HTTP port");
  return {
    args: [...opts, "--rootfs", rootfs, id, ...process],
    hostDirs,
    capabilities,
    readinessUrl: `http://127.0.0.1:${port}${probe.httpGet.path}`,
  };
}

/** "64Mi" → bytes (the binary suffixes Kubernetes quantities use for sizes). */
function quantityBytes(quantity: string): number {
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(quantity);
  if (!m) throw new Error(`quantity ${quantity} is not translated`);
  const unit = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 }[m[2] ?? ""] ?? 1;
  return Number(m[1]) * unit;
}
