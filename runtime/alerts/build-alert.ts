/**
 * Decoded kernel event + the watched file it matched → the Alert (api/alert.ts, the one
 * definition). Pure apart from the injected clock, procfs reader and id generator, so
 * the same function serves the agent, standalone `hive watch` and the benchmark.
 */
import { randomUUID } from "node:crypto";
import type { Alert } from "../../api/alert.ts";
import type { KernelEvent } from "../kernel/contract.ts";
import { type AlertSource, trapIdOf } from "./alert-source.ts";
import type { BootClock } from "./boot-clock.ts";
import type { ProcReader } from "./proc-info.ts";

export interface AlertContext {
  clock: BootClock;
  proc: ProcReader;
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

export function buildAlert(
  event: KernelEvent,
  source: AlertSource,
  context: AlertContext,
  suppressed = 0,
): Alert {
  const a = source.annotations;
  const comm = cleanComm(event.comm);
  const proc = context.proc.read(event.tgid, comm);
  const process: Alert["process"] = {
    pid: event.pid,
    tgid: event.tgid,
    uid: event.uid,
    gid: event.gid,
    comm,
  };
  if (proc.ppid !== undefined) process.ppid = proc.ppid;
  if (proc.exe !== undefined) process.exe = proc.exe;
  const cgroupId = safeInteger(event.cgroupId);
  if (cgroupId !== undefined) process.cgroup_id = cgroupId;

  const alert: Alert = {
    id: (context.newId ?? randomUUID)(),
    timestamp: context.clock.toIso(event.ktimeNs),
    hive_policy_name: a.hive_policy_name ?? "",
    trap_id: trapIdOf(source),
    metadata: {
      path: a.path ?? "",
      // The reference format's integer while JSON keeps it exact; beyond 2^53, the exact decimal.
      inode: safeInteger(event.key.ino) ?? event.key.ino.toString(),
      device: `${event.key.major}:${event.key.minor}`,
      mask: event.mask,
      accesses: [...event.accesses],
      count: Math.max(1, event.count),
      kernel_id: source.kernelId,
    },
    node: { name: a.node_name || source.nodeName },
    process,
  };
  if (source.policyNamespace !== undefined) alert.hive_policy_namespace = source.policyNamespace;
  // Standalone mode watches host paths: no pod, so no pod object (the schema allows its absence).
  if (a.pod_name && a.namespace) {
    alert.pod = {
      name: a.pod_name,
      namespace: a.namespace,
      container: { id: a.container_id ?? "", name: a.container_name ?? "" },
    };
  }
  if (suppressed > 0) alert.suppressed = suppressed;
  return alert;
}
