/**
 * Decoded kernel event + the watched file it matched → the Alert (api/alert.ts, the one
 * definition). Pure apart from the injected clock, ancestry lookup and id generator, so
 * the same function serves the agent, standalone `hive watch` and the benchmark. The
 * process is described only by what the kernel recorded (KernelEvent.process): nothing is
 * read from /proc after the fact, where a short-lived process is gone and a pid reused.
 */
import { randomUUID } from "node:crypto";
import { type Alert, type DenyReason, MAX_ANCESTORS } from "../../api/alert.ts";
import { DEFAULT_SEVERITY } from "../../api/policy.ts";
import type {
  Ancestor,
  ExecIdentity,
  ExecProvenance,
  KernelEvent,
  ProcessIdentity,
} from "../kernel/contract.ts";
import { type AlertSource, trapIdOf } from "./alert-source.ts";
import type { AllowMiss } from "./allowlist.ts";
import type { BootClock } from "./boot-clock.ts";

export interface AlertContext {
  clock: BootClock;
  /** The parent's ancestors (KernelWatcher.ancestors); none without it. */
  ancestors?: (process: ProcessIdentity) => Ancestor[];
  /** Alert id generator; default crypto.randomUUID (v4). */
  newId?: () => string;
}

/** The kernel's comm is 16 bytes, NUL-padded; keep what precedes the first NUL. */
function cleanComm(comm: string): string {
  const nul = comm.indexOf("\0");
  return (nul >= 0 ? comm.slice(0, nul) : comm).slice(0, 15);
}

function safeInteger(value: bigint): number | undefined {
  return value >= 0n && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : undefined;
}

type ProvenanceFields = Pick<
  Alert["process"],
  "exe_file" | "exe_loader_env" | "exe_env_unread" | "traced" | "chroot"
>;

/** Which file ran and what may run in it besides, for a responder to see a dropped binary at a glance. */
function provenanceFields(p: ExecProvenance | undefined, chroot: boolean | undefined): ProvenanceFields {
  const fields: ProvenanceFields = {};
  if (chroot) fields.chroot = true;
  if (p === undefined) return fields;
  if (p.file.ino > 0n)
    fields.exe_file = {
      layer: p.layer,
      device: `${p.file.major}:${p.file.minor}`,
      inode: p.file.ino.toString(),
    };
  if (p.loaderEnv.length > 0) fields.exe_loader_env = [...p.loaderEnv];
  if (p.envUnread) fields.exe_env_unread = true;
  if (p.traced) fields.traced = true;
  return fields;
}

/** The alert's exe fields: the path when the kernel knew it, and always where it came from. */
function exeFields(identity: ExecIdentity): {
  exe?: string;
  exe_source: ExecIdentity["source"];
  exe_truncated?: true;
} {
  const fields: { exe?: string; exe_source: ExecIdentity["source"]; exe_truncated?: true } = {
    exe_source: identity.source,
  };
  if (identity.exe !== undefined && identity.source !== "unknown") fields.exe = identity.exe;
  if (identity.truncated) fields.exe_truncated = true;
  return fields;
}

export function buildAlert(
  event: KernelEvent,
  source: AlertSource,
  context: AlertContext,
  suppressed = 0,
  /** Why each of the trap's allow entries did not hold (allowlist.ts), when it has some. */
  allowMisses?: readonly AllowMiss[],
): Alert {
  const a = source.annotations;
  const identity = event.process;
  const process: Alert["process"] = {
    pid: event.pid,
    tgid: event.tgid,
    uid: event.uid,
    gid: event.gid,
    comm: cleanComm(event.comm),
    ...exeFields(identity.exe),
    ...provenanceFields(identity.provenance, identity.chroot),
  };
  if (identity.nsPid !== undefined) process.ns_pid = identity.nsPid;
  if (identity.execNs > 0n && identity.exe.source !== "unknown")
    process.exec_time = context.clock.toIso(identity.execNs);
  if (identity.ppid !== undefined) process.ppid = identity.ppid;
  if (identity.parent) {
    const parent = identity.parent;
    process.parent = {
      pid: parent.pid,
      ...exeFields(parent.exe),
      ...provenanceFields(parent.provenance, parent.chroot),
    };
    if (parent.execedSinceFork) process.parent.exec_since_fork = true;
    if (parent.reparented) process.parent.reparented = true;
    const parentComm = identity.parent.comm === undefined ? "" : cleanComm(identity.parent.comm);
    if (parentComm) process.parent.comm = parentComm;
    const ancestors = context.ancestors?.(identity) ?? [];
    if (ancestors.length > 0)
      process.ancestors = ancestors.slice(0, MAX_ANCESTORS).map((a) => ({ pid: a.pid, ...exeFields(a.exe) }));
  }
  const cgroupId = safeInteger(event.cgroupId);
  if (cgroupId !== undefined) process.cgroup_id = cgroupId;

  const alert: Alert = {
    id: (context.newId ?? randomUUID)(),
    timestamp: context.clock.toIso(event.ktimeNs),
    hive_policy_name: a.hive_policy_name ?? "",
    trap_id: trapIdOf(source),
    severity: source.severity ?? DEFAULT_SEVERITY,
    metadata: {
      path: a.path ?? "",
      // The reference format's integer while JSON keeps it exact; beyond 2^53, the exact decimal.
      inode: safeInteger(event.key.ino) ?? event.key.ino.toString(),
      device: `${event.key.major}:${event.key.minor}`,
      mask: event.mask,
      accesses: [...event.accesses],
      ...(event.change ? { change: event.change } : {}),
      count: Math.max(1, event.count),
      kernel_id: source.kernelId,
    },
    node: { name: a.node_name || source.nodeName },
    process,
  };
  if (source.policyNamespace !== undefined) alert.hive_policy_namespace = source.policyNamespace;
  if (source.trapLabels !== undefined && Object.keys(source.trapLabels).length > 0)
    alert.labels = { ...source.trapLabels };
  if (source.clusterName) alert.cluster = { name: source.clusterName };
  // Standalone mode watches host paths: no pod, so no pod object (the schema allows its absence).
  if (a.pod_name && a.namespace) {
    const facts = source.pod;
    alert.pod = {
      name: a.pod_name,
      namespace: a.namespace,
      container: {
        id: a.container_id ?? "",
        name: a.container_name ?? "",
        ...(facts?.image ? { image: facts.image } : {}),
      },
    };
    if (facts?.labels && Object.keys(facts.labels).length > 0) alert.pod.labels = { ...facts.labels };
    if (facts?.workload) alert.pod.workload = { ...facts.workload };
  }
  if (allowMisses !== undefined && allowMisses.length > 0)
    alert.allow_misses = allowMisses.map(({ entry, field, reason }) => ({ entry, field, reason }));
  if (source.deny !== undefined || event.deny !== undefined) {
    const reason: DenyReason =
      event.deny === "denied" ? "denied" : event.deny === "dryRun" ? "dry-run" : "not-armed";
    alert.denied = reason === "denied";
    alert.deny_reason = reason;
  }
  if (event.summarized && event.summarized.bursts > 0) alert.summarized = { ...event.summarized };
  if (suppressed > 0) alert.suppressed = suppressed;
  return alert;
}
