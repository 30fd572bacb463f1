/**
 * The agent's lifecycle under faults, inside the image guest (agent-in-container.ts runs it
 * after its first alert, on the kernels the host test names): the API server down for 60 s (the
 * host's fault proxy cut, so the guest's connections to it fail),
 * the agent killed with SIGKILL and started again as a DaemonSet would (same spec, same host
 * directories: the pins under /sys/fs/bpf and the spool survive; its loader's first HiveData list
 * slowed to 15 s, so the events waiting in the ring buffer come before their traps are known),
 * and reads made just before SIGTERM. Each phase reads the trapped file with its own command
 * name (a symlink to busybox named `busybox-<phase>`; the kernel reports it as comm), each read
 * a separate process, so each is one expected alert: the kernel folds the checks of one
 * thread's access, and the rate limit (per trap × container × executable) allows bursts of
 * 200. One more reader reads
 * before the kill and stays alive until after the restart: its burst stays in the kernel's
 * burst table (a burst leaves it at its thread's next access or exit), delivered by the old
 * agent's sweep; the restarted agent must not deliver it again, nor the kernel when the
 * thread exits. This module only records what happened; the host test
 * (agent-on-kernels.test.ts) asserts on it.
 */
import { readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import type { CoordinationV1Api } from "@kubernetes/client-node";
import { LABEL_KERNEL_ID } from "../../../api/meta.ts";
import type { Receiver } from "../../alerts/receiver.ts";
import type { GuestApi } from "../../cluster/guest-client.ts";
import { waitFor } from "../../cluster/testing.ts";

/** Reads per phase: each must arrive as its own alert. */
export const READS_PER_PHASE = 3;
export const OUTAGE_MS = 60_000;
/** How long the restarted agent's loader waits for its first HiveData list. */
export const LOADER_LIST_DELAY_MS = 15_000;
/**
 * When the outage's reads are made, from its start: one at once, the others past the kernel
 * Lease's renew deadline (36 s), when a role that ended on failed renewals would be gone, and
 * early enough for their alerts to arrive before the API server returns.
 */
export const OUTAGE_READS_AT_MS = [0, 40_000, 48_000];
/** The command name of each phase's reads (at most 15 characters: the kernel's comm). */
export const PHASE_COMM = {
  outage: "busybox-o",
  /** One reader that reads once before the kill and stays alive until after the restart. */
  held: "busybox-h",
  killed: "busybox-k",
  /** Reads while the API server is down and the agent was killed and started again. */
  resumed: "busybox-r",
  term: "busybox-t",
} as const;
/** The outage during which the agent is killed and restarted. */
export const RESUME_OUTAGE_MS = 40_000;

/** One POST the receiver accepted, as the assertions need it. */
export interface SeenAlert {
  id: string;
  at: number;
  comm: string;
  pid: number;
  exe: string;
  pod: string;
  namespace: string;
  container: string;
  policy: string;
  trapId: string;
  path: string;
  count: number;
}

export interface LifecycleResult {
  outage: {
    /** When the API server stopped answering and when it listened again (ms since the epoch). */
    downAt: number;
    upAt: number;
    /** Readiness during the outage (the kernel program stays attached and the agent ready). */
    readyzDuring: number;
    /** Loader Leases after the outage, once the holder renewed: name, holder, renewed after upAt. */
    loaderLeases: Array<{ name: string; holder: string; renewedAfterOutage: boolean }>;
    /** The loader role's lines in the agent's log up to the kill: the node lock and the Lease taken, the role ended. */
    lockTaken: number;
    leaseTaken: number;
    loaderStops: number;
  };
  killed: {
    /** The agent's pins adopted by the restarted agent (its log says so). */
    adoptedLink: boolean;
    /** Alerts waiting in the spool when the agent was killed (0: every earlier alert acknowledged). */
    spooledAtKill: number;
    /** The restarted agent's counts of what it read, dropped and held back (its /metrics): where reads went. */
    counts: string[];
  };
  resumed: {
    downAt: number;
    upAt: number;
    /** The restarted agent said it resumed its loader from the pins and the routing snapshot. */
    resumedFromPins: boolean;
    /** Its alert lines (stdout) for the reads, printed before the API server came back. */
    alertLinesBeforeApi: number;
    /** Its readiness meanwhile (503: discover cannot list; the loader routes all the same). */
    readyzDuring: number;
  };
  term: {
    /** The agent's exit after SIGTERM, and the alerts accepted by then. */
    stoppedMs: number;
    deliveredBeforeExit: number;
  };
  /** Every POST the receiver accepted, in arrival order, from the first alert to the end. */
  alerts: SeenAlert[];
}

export interface LifecycleContext {
  /** The host's API server: outages and faults of its proxy. */
  api: GuestApi;
  coordination: CoordinationV1Api;
  namespace: string;
  receiver: Receiver;
  /** Runs a command in the workload container. */
  exec(args: string[]): Promise<string>;
  workloadId: string;
  ctr(args: string[]): Promise<string>;
  agentId: string;
  trapped: string;
  readinessUrl: string;
  metricsUrl: string;
  /**
   * Starts the agent container (`ctr run` with the DaemonSet's spec) logging to a new file; waits
   * for /readyz, or with `ready: false` only for its metrics endpoint to answer.
   */
  startAgent(options?: { ready?: boolean }): Promise<void>;
  /** The agent's log so far (every run). */
  agentLog(): string;
  remaining(): number;
  mark(name: string, next: string): void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** Links busybox under each phase's command name in the workload's root. */
export function addPhaseCommands(rootfs: string): void {
  for (const comm of Object.values(PHASE_COMM)) symlinkSync("busybox", join(rootfs, "bin", comm));
}

export function seenAlerts(receiver: Receiver): SeenAlert[] {
  return receiver.accepted.map((r) => {
    const a = JSON.parse(r.body) as {
      hive_policy_name: string;
      trap_id: string;
      metadata: { path: string; count: number };
      pod: { name: string; namespace: string; container: { id: string } };
      process: { comm: string; tgid: number; exe?: string };
    };
    return {
      id: r.id,
      at: r.at,
      comm: a.process.comm,
      pid: a.process.tgid,
      exe: a.process.exe ?? "",
      pod: a.pod.name,
      namespace: a.pod.namespace,
      container: a.pod.container.id,
      policy: a.hive_policy_name,
      trapId: a.trap_id,
      path: a.metadata.path,
      count: a.metadata.count,
    };
  });
}

/** Phases (a) and (b); (c) is `readThenTerminate`, run where the guest stops the agent. */
export async function outageAndKill(ctx: LifecycleContext, result: Partial<LifecycleResult>): Promise<void> {
  const read = (comm: string) => ctx.exec([`/bin/${comm}`, "cat", ctx.trapped]);
  const arrived = (comm: string, count: number) => () =>
    seenAlerts(ctx.receiver).filter((a) => a.comm === comm).length >= count;
  const bounded = (ms: number) => Math.min(ms, ctx.remaining());
  /** Waits for a phase's alerts; a shortfall is recorded (the host test names it), not thrown. */
  const settle = (comm: string, ms: number, count = READS_PER_PHASE) =>
    waitFor(arrived(comm, count), { timeoutMs: bounded(ms), intervalMs: 250 }).catch(() => undefined);

  // (a) The API server away for 60 s, the trapped file read meanwhile.
  const downAt = Date.now();
  const outage = await ctx.api.outage(OUTAGE_MS);
  for (const at of OUTAGE_READS_AT_MS) {
    await sleep(downAt + at - Date.now());
    await read(PHASE_COMM.outage);
  }
  await settle(PHASE_COMM.outage, downAt + OUTAGE_MS - 1_000 - Date.now());
  const readyzDuring = (await fetch(ctx.readinessUrl).catch(() => undefined))?.status ?? 0;
  await outage.over();
  const upAt = Date.now();
  ctx.mark("outageOver", "the loader Lease renewed after the outage");
  const loaderLeases = async () =>
    (await ctx.coordination.listNamespacedLease({ namespace: ctx.namespace })).items
      .filter((l) => l.metadata?.name?.startsWith("hive-loader-"))
      .map((l) => ({
        name: l.metadata?.name ?? "",
        holder: l.spec?.holderIdentity ?? "",
        renewedAfterOutage: new Date(String(l.spec?.renewTime ?? 0)).getTime() > upAt,
      }));
  // The kernel Lease renews every 12 s: wait for one renewal after the outage.
  await waitFor(async () => (await loaderLeases()).some((l) => l.renewedAfterOutage), {
    timeoutMs: bounded(45_000),
    intervalMs: 1000,
  }).catch(() => undefined);
  const loaderLines = ctx
    .agentLog()
    .split("\n")
    .filter((line) => line.includes('"role":"loader"'));
  result.outage = {
    downAt,
    upAt,
    readyzDuring,
    loaderLeases: await loaderLeases(),
    lockTaken: loaderLines.filter((line) => line.includes('"became leader"') && line.includes('"lock"'))
      .length,
    leaseTaken: loaderLines.filter((line) => line.includes('"became leader"') && line.includes('"lease"'))
      .length,
    loaderStops: loaderLines.filter((line) => line.includes('"stopped leading"')).length,
  };
  ctx.mark("leaseChecked", "SIGKILL of the agent");

  // (b) Killed. First the reader that outlives the agent: it reads once and waits.
  await ctx.ctr([
    "task",
    "exec",
    "--detach",
    "--exec-id",
    "held-reader",
    ctx.workloadId,
    `/bin/${PHASE_COMM.held}`,
    "sh",
    "-c",
    `read line < ${ctx.trapped}; sleep 1000`,
  ]);
  await settle(PHASE_COMM.held, 60_000, 1);
  const spooledAtKill = await untilSpoolEmpty(ctx);
  await ctx.ctr(["task", "kill", "-s", "SIGKILL", ctx.agentId]);
  await waitFor(
    async () => new RegExp(`^${ctx.agentId}\\s+\\d+\\s+STOPPED`, "m").test(await ctx.ctr(["task", "ls"])),
    { timeoutMs: bounded(60_000), intervalMs: 250, what: "the agent to die on SIGKILL" },
  );
  ctx.mark("agentKilled", "reads while the agent is down");
  for (let i = 0; i < READS_PER_PHASE; i++) await read(PHASE_COMM.killed);
  // The kubelet restarts the container: the old task and container go, a new one runs the same spec.
  await ctx.ctr(["task", "delete", ctx.agentId]);
  await ctx.ctr(["container", "delete", ctx.agentId]);
  // A slow API server at the restart: the loader's first HiveData list (by kernel id) takes 15 s,
  // so the new agent reads the waiting events from the ring buffer before it knows their traps.
  const slowList = await ctx.api.inject({
    verb: "list",
    resource: "hivedata",
    delayMs: LOADER_LIST_DELAY_MS,
    queryIncludes: LABEL_KERNEL_ID,
  });
  await ctx.startAgent();
  ctx.mark("agentRestarted", "the downtime's alerts");
  await settle(PHASE_COMM.killed, 120_000);
  await slowList();
  // The held reader ends now: the kernel must not emit its burst again at the thread's exit.
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    const comm = (() => {
      try {
        return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
      } catch {
        return "";
      }
    })();
    if (comm === PHASE_COMM.held) process.kill(Number(pid), "SIGKILL");
  }
  ctx.mark("killedDelivered", "reads just before SIGTERM");
  result.killed = {
    adoptedLink: /adopted pinned BPF link/.test(ctx.agentLog()),
    spooledAtKill,
    counts: await lossCounts(ctx),
  };
}

/** The agent's counters of events read, dropped or held back, and of alerts made, as /metrics lines. */
async function lossCounts(ctx: { metricsUrl: string }): Promise<string[]> {
  const text = await (await fetch(ctx.metricsUrl)).text();
  return text
    .split("\n")
    .filter((line) =>
      /^hive_(kernel_events|kernel_events_dropped|kernel_events_lost|alerts|alerts_suppressed|alerts_dropped)_total[{ ]/.test(
        line,
      ),
    );
}

/**
 * (c) The API server goes away, then the agent is killed and started again while it is away:
 * the restarted agent must resume its loader from the pins and the routing snapshot (no Lease,
 * no list), alert the reads meanwhile on stdout and spool them, and deliver them once.
 */
export async function killedDuringOutage(
  ctx: LifecycleContext,
  result: Partial<LifecycleResult>,
): Promise<void> {
  await untilSpoolEmpty(ctx);
  const downAt = Date.now();
  const outage = await ctx.api.outage(RESUME_OUTAGE_MS);
  await killAgent(ctx);
  await ctx.startAgent({ ready: false });
  ctx.mark("agentRestartedDuringOutage", "reads while the API server is away");
  for (let i = 0; i < READS_PER_PHASE; i++)
    await ctx.exec([`/bin/${PHASE_COMM.resumed}`, "cat", ctx.trapped]);
  const lines = () =>
    ctx
      .agentLog()
      .split("\n")
      .filter((line) => line.includes(`"comm":"${PHASE_COMM.resumed}"`) && line.includes('"trap_id"')).length;
  await waitFor(() => lines() >= READS_PER_PHASE, {
    timeoutMs: Math.min(Math.max(1000, downAt + RESUME_OUTAGE_MS - 2_000 - Date.now()), ctx.remaining()),
    intervalMs: 250,
  }).catch(() => undefined);
  const alertLinesBeforeApi = lines();
  const readyzDuring = (await fetch(ctx.readinessUrl).catch(() => undefined))?.status ?? 0;
  await outage.over();
  const upAt = Date.now();
  ctx.mark("resumeOutageOver", "the resumed reads delivered");
  await waitFor(
    () => seenAlerts(ctx.receiver).filter((a) => a.comm === PHASE_COMM.resumed).length >= READS_PER_PHASE,
    {
      timeoutMs: Math.min(120_000, ctx.remaining()),
      intervalMs: 250,
    },
  ).catch(() => undefined);
  result.resumed = {
    downAt,
    upAt,
    resumedFromPins: /resuming this node's loader from its pinned state/.test(ctx.agentLog()),
    alertLinesBeforeApi,
    readyzDuring,
  };
}

/**
 * Waits until every alert so far is acknowledged (the spool empty), so that any repeat after a
 * kill is a duplicate, not an alert whose answer the killed agent had not read yet; returns
 * what the spool held then (-1 if unreadable).
 */
async function untilSpoolEmpty(ctx: LifecycleContext): Promise<number> {
  const spooled = async () =>
    Number(/^hive_spool_alerts (\d+)$/m.exec(await (await fetch(ctx.metricsUrl)).text())?.[1] ?? -1);
  await waitFor(async () => (await spooled()) === 0, {
    timeoutMs: Math.min(30_000, ctx.remaining()),
    intervalMs: 250,
  }).catch(() => undefined);
  return spooled().catch(() => -1);
}

/** SIGKILL, and the container gone as the kubelet removes it before starting the next. */
async function killAgent(ctx: LifecycleContext): Promise<void> {
  await ctx.ctr(["task", "kill", "-s", "SIGKILL", ctx.agentId]);
  await waitFor(
    async () => new RegExp(`^${ctx.agentId}\\s+\\d+\\s+STOPPED`, "m").test(await ctx.ctr(["task", "ls"])),
    { timeoutMs: Math.min(60_000, ctx.remaining()), intervalMs: 250, what: "the agent to die on SIGKILL" },
  );
  await ctx.ctr(["task", "delete", ctx.agentId]);
  await ctx.ctr(["container", "delete", ctx.agentId]);
}

/** (d) Reads, then SIGTERM at once: the agent's last events must be delivered before it exits. */
export async function readThenTerminate(
  ctx: LifecycleContext,
  result: Partial<LifecycleResult>,
  terminate: () => Promise<void>,
): Promise<void> {
  for (let i = 0; i < READS_PER_PHASE; i++) await ctx.exec([`/bin/${PHASE_COMM.term}`, "cat", ctx.trapped]);
  const from = performance.now();
  await terminate();
  result.term = {
    stoppedMs: Math.round(performance.now() - from),
    deliveredBeforeExit: seenAlerts(ctx.receiver).filter((a) => a.comm === PHASE_COMM.term).length,
  };
  result.alerts = seenAlerts(ctx.receiver);
}
