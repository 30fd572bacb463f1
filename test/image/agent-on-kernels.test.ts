/**
 * The agent as a cluster runs it: the image built from Dockerfile, started under containerd +
 * runc with the container spec of the rendered DaemonSet (capabilities, seccomp
 * RuntimeDefault, read-only root, host PID namespace, mounts, downward-API environment,
 * service-account token, args appended to the entrypoint), on each stock kernel under QEMU,
 * as `hive agent` against a real kube-apiserver on the host (one control plane per guest, so the
 * kernels' runs share no Node, Pod or Lease), which the guest reaches at its one forwarded address
 * (test/cluster/guest-api.ts); its audit log must show no refused agent request. A read of the
 * trapped file inside a real container must reach the callback. On the kernels of LIFECYCLE_SERIES the guest then takes
 * the agent through an API-server outage, a SIGKILL and restart, and a SIGTERM
 * (guest/lifecycle.ts), and every access made meanwhile must be delivered exactly once. Needs
 * root and qemu; locally a missing prerequisite skips loudly, under CI=true it fails.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { isHiveError } from "../../api/errors.ts";
import { AGENT_CAPABILITIES } from "../../component/builders/daemonset.ts";
import { DEFAULT_RESOURCES } from "../../component/config/defaults.ts";
import { guestApiUnavailable } from "../cluster/guest-api.ts";
import { findKernels, vmUnavailable } from "../kernel/vm.ts";
import { capabilityMask } from "./ctr-run-args.ts";
import { type LifecycleResult, OUTAGE_MS, PHASE_COMM, READS_PER_PHASE } from "./guest/lifecycle.ts";
import { type GuestResult, type Outcome, prepareAgentRootfs, runImageGuest } from "./image-guest.ts";

const SERIES = ["6.12", "6.1", "5.10"] as const;
/** What `--attach auto` must choose with the DaemonSet's capabilities (no SYS_ADMIN). */
const EXPECTED_ATTACH: Record<(typeof SERIES)[number], string> = {
  "6.12": "kprobe.multi",
  "6.1": "fentry",
  "5.10": "fentry",
};
/**
 * Where the lifecycle phase runs (it adds about two minutes of guest time): the kernels whose
 * links can be pinned, so a restarted agent adopts the attached program.
 */
const LIFECYCLE_SERIES: readonly string[] = ["6.12"];
const isCI = process.env.CI === "true";
const unavailable = vmUnavailable() ?? guestApiUnavailable();
const { found } = findKernels();
const wanted = process.env.HIVE_KERNELS?.split(",") ?? [...SERIES];

/**
 * One guest per kernel, all booted at once: each keeps one emulated CPU busy for minutes, and
 * one after the other they would be the longest part of the suite.
 */
const outcomes = new Map<string, Promise<Outcome>>();
beforeAll(async () => {
  const runnable = SERIES.filter(
    (s) => wanted.includes(s) && !unavailable && found.some((k) => k.series === s),
  );
  if (runnable.length === 0) return;
  const rootfs = prepareAgentRootfs();
  rootfs.catch(() => undefined); // reported by every kernel's outcome
  for (const series of runnable) {
    const kernel = found.find((k) => k.series === series);
    if (kernel)
      outcomes.set(series, runImageGuest(kernel, rootfs, { lifecycle: LIFECYCLE_SERIES.includes(series) }));
  }
  await Promise.all(outcomes.values());
}, 2_400_000);

for (const series of SERIES) {
  if (!wanted.includes(series)) continue;
  const kernel = found.find((k) => k.series === series);
  const reason =
    unavailable ?? (kernel ? null : `kernel ${series} not fetched (sh test/kernel/fetch-kernels.sh)`);
  if (reason && !isCI)
    console.warn(`!!! agent image on Linux ${series} SKIPPED: ${reason} (under CI=true this fails)`);
  const runIt = reason && !isCI ? it.skip : it;

  describe(`the agent image with the DaemonSet's container spec, on Linux ${series}`, () => {
    let outcome: Outcome = {};
    beforeAll(async () => {
      outcome = (await outcomes.get(series)) ?? {};
    });

    const guest = (): GuestResult => {
      if (reason) throw new Error(`cannot run: ${reason}`);
      const { result, boot, failure } = outcome;
      // The hint carries the console and output tails: put them where the test report shows them.
      if (failure) throw isHiveError(failure) ? new Error(failure.describe(), { cause: failure }) : failure;
      if (!result) throw new Error(`no result from the guest; output tail:\n${boot?.output.slice(-4000)}`);
      if (!result.ok) throw new Error(`${result.error}\nagent log tail:\n${result.agentLogTail}`);
      // Every request of the agent passed the rendered RBAC and admission policies.
      if (outcome.refused) throw new Error(outcome.refused);
      return result;
    };

    runIt("runs with exactly the spec's capabilities, no_new_privs, seccomp and a read-only root", () => {
      const r = guest();
      expect(r.capabilities.sort()).toEqual([...AGENT_CAPABILITIES].sort());
      expect(BigInt(`0x${r.process.capEff}`)).toBe(capabilityMask(AGENT_CAPABILITIES));
      expect(r.process.noNewPrivs).toBe("1");
      expect(r.process.seccomp).toBe("2"); // SECCOMP_MODE_FILTER: the runtime's default profile
      expect(r.process.rootReadOnly).toBe(true);
    });

    runIt(`attaches by ${EXPECTED_ATTACH[series]} without SYS_ADMIN and says why in hive status`, () => {
      const r = guest();
      expect(r.readyz).toContain("[+]kernel-program ok");
      const root = r.status[0];
      expect(root?.attachMode).toBe(EXPECTED_ATTACH[series]);
      expect(root?.attachReason).toMatch(/CAP_BPF \+ CAP_PERFMON/);
    });

    runIt("idles within the DaemonSet's default memory request, its memory said by what it is", () => {
      const m = guest().memory;
      expect(m, "the guest read no memory figures").toBeDefined();
      const request = Number(/^(\d+)Mi$/.exec(String(DEFAULT_RESOURCES.requests?.memory))?.[1]);
      expect(m?.rssMiB).toBeGreaterThan(0);
      expect(m?.rssMiB, JSON.stringify(m)).toBeLessThanOrEqual(request);
    });

    runIt("alerts the callback when a process in another container reads the trapped file", () => {
      const r = guest();
      expect(r.alert).toMatchObject({
        hive_policy_name: expect.any(String),
        metadata: { path: "/etc/hive-secret" },
        pod: { name: "web", namespace: "default", container: { id: "containerd://web-app", name: "app" } },
        node: { name: "node-image" },
        process: {
          comm: "busybox", // /bin/busybox cat: the kernel reports the executed file's name
          // Tracked in the kernel with the DaemonSet's capabilities: the path inside the container.
          exe: "/bin/busybox",
          exe_source: "exec",
        },
      });
    });

    if (!LIFECYCLE_SERIES.includes(series)) return;
    const lifecycle = (): LifecycleResult => {
      const r = guest();
      if (!r.lifecycle?.alerts)
        throw new Error(`the lifecycle phase did not finish: ${JSON.stringify(r.lifecycle)}`);
      return r.lifecycle;
    };
    /** The alerts of one phase's reads; each must name the workload's pod and the one trap. */
    const phase = (l: LifecycleResult, comm: string) => {
      const first = guest().alert as unknown as { hive_policy_name: string; trap_id: string };
      const alerts = l.alerts.filter((a) => a.comm === comm);
      for (const a of alerts) {
        expect(a).toMatchObject({
          pod: "web",
          namespace: "default",
          container: "containerd://web-app",
          policy: first.hive_policy_name,
          trapId: first.trap_id,
          path: "/etc/hive-secret",
          exe: "/bin/busybox",
        });
      }
      return alerts;
    };

    runIt(
      "keeps alerting while the API server is down for 60 s, and still one loader holds the kernel after",
      () => {
        const l = lifecycle();
        const during = phase(l, PHASE_COMM.outage);
        expect(l.outage.upAt - l.outage.downAt).toBeGreaterThanOrEqual(OUTAGE_MS);
        // One summary, so that a failure shows every difference at once.
        expect({
          // Every read alerted, each its own process, each delivered while the API server was away.
          reads: during.length,
          processes: new Set(during.map((a) => a.pid)).size,
          deliveredDuringOutage: during.filter((a) => a.at < l.outage.upAt).length,
          readyzDuring: l.outage.readyzDuring,
          // The loader role never ended: the node lock and the kernel's Lease taken once, one Lease, renewed.
          lockTaken: l.outage.lockTaken,
          leaseTaken: l.outage.leaseTaken,
          loaderStops: l.outage.loaderStops,
          loaderLeases: l.outage.loaderLeases,
        }).toEqual({
          reads: READS_PER_PHASE,
          processes: READS_PER_PHASE,
          deliveredDuringOutage: READS_PER_PHASE,
          readyzDuring: 200,
          lockTaken: 1,
          leaseTaken: 1,
          loaderStops: 0,
          loaderLeases: [
            {
              name: expect.stringMatching(/^hive-loader-/),
              // node/pod: admission binds both to the agent's pod-bound token.
              holder: "node-image/hive-agent-x1",
              renewedAfterOutage: true,
            },
          ],
        });
      },
    );

    runIt(
      "delivers each read made while the agent was killed once, to its pod and trap, and nothing from before again",
      () => {
        const l = lifecycle();
        const downtime = phase(l, PHASE_COMM.killed);
        phase(l, PHASE_COMM.held);
        const byComm: Record<string, number> = {};
        for (const a of l.alerts) byComm[a.comm] = (byComm[a.comm] ?? 0) + 1;
        expect(
          {
            // Before the kill every alert was acknowledged, and the restarted agent adopted the attached program.
            spooledAtKill: l.killed.spooledAtKill,
            adoptedLink: l.killed.adoptedLink,
            downtimeProcesses: new Set(downtime.map((a) => a.pid)).size,
            // The receiver kept every POST: each alert id and each access (process) exactly once.
            distinctIds: new Set(l.alerts.map((a) => a.id)).size,
            distinctAccesses: new Set(l.alerts.map((a) => `${a.comm}/${a.pid}`)).size,
            byComm,
          },
          `the restarted agent's counts: ${l.killed.counts.join("; ")}`,
        ).toEqual({
          spooledAtKill: 0,
          adoptedLink: true,
          downtimeProcesses: READS_PER_PHASE,
          distinctIds: l.alerts.length,
          distinctAccesses: l.alerts.length,
          byComm: {
            busybox: 1,
            [PHASE_COMM.outage]: READS_PER_PHASE,
            [PHASE_COMM.held]: 1,
            [PHASE_COMM.killed]: READS_PER_PHASE,
            [PHASE_COMM.resumed]: READS_PER_PHASE,
            [PHASE_COMM.term]: READS_PER_PHASE,
          },
        });
      },
    );

    runIt(
      "an agent killed and restarted while the API server is down resumes from its pins: the reads meanwhile are alerted at once and delivered once",
      () => {
        const l = lifecycle();
        const resumed = phase(l, PHASE_COMM.resumed);
        expect({
          resumedFromPins: l.resumed.resumedFromPins,
          // On stdout (and into the spool) before the API server was back: routed from the snapshot.
          alertLinesBeforeApi: l.resumed.alertLinesBeforeApi,
          delivered: resumed.length,
          processes: new Set(resumed.map((a) => a.pid)).size,
        }).toEqual({
          resumedFromPins: true,
          alertLinesBeforeApi: READS_PER_PHASE,
          delivered: READS_PER_PHASE,
          processes: READS_PER_PHASE,
        });
      },
    );

    runIt("delivers the reads made just before SIGTERM before the agent exits", () => {
      const l = lifecycle();
      const last = phase(l, PHASE_COMM.term);
      expect({
        deliveredBeforeExit: l.term.deliveredBeforeExit,
        processes: new Set(last.map((a) => a.pid)).size,
      }).toEqual({ deliveredBeforeExit: READS_PER_PHASE, processes: READS_PER_PHASE });
    });
  });
}
