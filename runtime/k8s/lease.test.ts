/**
 * Leader election against a real kube-apiserver (its Lease validation, resourceVersion checks
 * and 409 conflicts) behind the fault proxy. Each candidate talks as its own user, so the proxy
 * can cut off or slow down exactly one of them. Every test checks the safety property from the
 * callbacks' timestamps: no two candidates lead at the same moment.
 */
import { CoordinationV1Api } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { isHiveError } from "../../api/errors.ts";
import { type RealApi, startRealApi } from "../../test/cluster/real-api.ts";
import { waitFor } from "../../test/cluster/testing.ts";
import { createLogger } from "../log.ts";
import { createKubeClients } from "./kube-client.ts";
import { LeaderElector } from "./lease.ts";

// A real API server's writes (etcd behind it) take tens of milliseconds on a loaded machine, more
// now and then: the renew deadline leaves room for several of them.
const LEASE_MS = 1500;
const RENEW_DEADLINE_MS = 1000;
const RETRY_MS = 200;
const quiet = createLogger({}, { level: "error", sink: () => {} });

interface Term {
  who: string;
  start: number;
  end?: number;
}

let api: RealApi;
let terms: Term[];
const electors: LeaderElector[] = [];

function candidate(
  identity: string,
  lease: string,
  timings: {
    leaseDurationMs?: number;
    renewDeadlineMs?: number;
    retryPeriodMs?: number;
    renewPeriodMs?: number;
    keepRoleWhileUnconfirmed?: boolean;
  } = {},
) {
  const elector = new LeaderElector({
    // Its own user (impersonated by the proxy, all rights): the proxy's faults can single it out.
    coordination: createKubeClients({
      kubeConfig: api.kubeConfig({ username: identity, groups: ["system:masters"] }),
    }).coordination,
    namespace: "kube-system",
    name: lease,
    identity,
    leaseDurationMs: LEASE_MS,
    renewDeadlineMs: RENEW_DEADLINE_MS,
    retryPeriodMs: RETRY_MS,
    ...timings,
    logger: quiet,
    onStartedLeading: () => {
      terms.push({ who: identity, start: performance.now() });
    },
    onStoppedLeading: () => {
      const open = terms.findLast((t) => t.who === identity && t.end === undefined);
      if (open) open.end = performance.now();
    },
  });
  electors.push(elector);
  return elector;
}

/** A started candidate. */
function started(identity: string, lease: string) {
  const elector = candidate(identity, lease);
  elector.start();
  return elector;
}

/** A started candidate that has become the lease's first leader. */
async function leader(identity: string, lease: string) {
  const elector = started(identity, lease);
  await waitFor(() => elector.isLeader(), { what: `${identity} to lead` });
  return elector;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** At most one leader at any instant: sorted by start, each term ends before the next begins. */
function expectNoOverlap(): void {
  const sorted = [...terms].sort((a, b) => a.start - b.start);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1] as Term;
    const cur = sorted[i] as Term;
    expect(prev.end, `${prev.who} still leading when ${cur.who} started`).toBeDefined();
    expect(prev.end as number).toBeLessThanOrEqual(cur.start);
  }
}

async function lease(name: string) {
  return api
    .kubeConfig()
    .makeApiClient(CoordinationV1Api)
    .readNamespacedLease({ namespace: "kube-system", name });
}

beforeAll(async () => {
  api = await startRealApi({ controllerManager: false });
});
beforeEach(() => {
  terms = [];
});
afterEach(async () => {
  await Promise.all(electors.splice(0).map((e) => e.stop({ release: false })));
});
afterAll(async () => {
  await api?.stop();
});

describe("LeaderElector", () => {
  it("acquires a new lease, keeps renewing it, and releases it on stop", async () => {
    const a = await leader("node-a", "solo");
    const first = await lease("solo");
    expect(first.spec?.holderIdentity).toBe("node-a");
    expect(first.spec?.leaseDurationSeconds).toBe(Math.ceil(LEASE_MS / 1000));
    expect(String(first.spec?.renewTime)).toMatch(/\.\d{6}Z$/);
    await waitFor(
      async () => String((await lease("solo")).spec?.renewTime) !== String(first.spec?.renewTime),
      { what: "a renewal" },
    );
    const renewed = await lease("solo");
    expect(String(renewed.spec?.acquireTime)).toBe(String(first.spec?.acquireTime));
    expect(renewed.spec?.leaseTransitions).toBe(0);
    await a.stop();
    expect(terms).toHaveLength(1);
    expect(terms[0]?.end).toBeDefined();
    expect((await lease("solo")).spec?.holderIdentity).toBe("");
  });

  it("renews with one request per period while leading (no read before each write)", async () => {
    await leader("frugal", "frugal");
    api.resetRequests();
    await sleep(6 * RETRY_MS);
    const gets = api.countRequests({ user: "frugal", verb: "get" });
    const updates = api.countRequests({ user: "frugal", verb: "update" });
    expect(updates).toBeGreaterThanOrEqual(3);
    expect(gets).toBe(0);
  });

  it("a holder renews every renewPeriodMs while renewals succeed, and retries every retryPeriodMs after one fails", async () => {
    const RENEW_MS = 2.5 * RETRY_MS;
    // A deadline with room for a renewal, a failed one and its retry, each a real request.
    const a = candidate("calm", "calm", {
      renewPeriodMs: RENEW_MS,
      leaseDurationMs: 2 * LEASE_MS,
      renewDeadlineMs: 2 * RENEW_DEADLINE_MS,
    });
    a.start();
    await waitFor(() => a.isLeader(), { what: "calm to lead" });
    api.resetRequests();
    await sleep(10 * RETRY_MS);
    const updates = api.requests.filter((r) => r.user === "calm" && r.verb === "update");
    // Every RENEW_MS (× up to 1.2 jitter) over 10 retry periods: 3–4 writes, not the 8–10 of renewing every retry.
    expect(updates.length).toBeGreaterThanOrEqual(2);
    expect(updates.length).toBeLessThanOrEqual(5);
    // One renewal fails: the next attempt comes a retry period later, not a renew period.
    api.resetRequests();
    const heal = api.inject({ user: "calm", verb: "update", status: 503, times: 1 });
    await waitFor(() => api.requests.filter((r) => r.user === "calm" && r.verb === "update").length >= 2, {
      what: "a retry after the failed renewal",
      timeoutMs: 4 * RENEW_MS,
    });
    heal();
    const [failed, retried] = api.requests.filter((r) => r.user === "calm" && r.verb === "update");
    expect(failed?.code).toBe(503);
    expect((retried?.time ?? 0) - (failed?.time ?? 0)).toBeLessThan(RENEW_MS);
    expect(a.isLeader()).toBe(true);
  });

  it("fails over when the holder dies: another takes over within the lease duration, never both", async () => {
    const a = await leader("node-a", "failover");
    const b = started("node-b", "failover");
    await sleep(3 * RETRY_MS);
    expect(b.isLeader()).toBe(false);
    expect(b.leader()).toBe("node-a");
    // The holder dies: no release, no more renewals.
    const lastRenewal = Math.max(
      ...api.requests.filter((r) => r.user === "node-a" && r.code === 200).map((r) => r.time),
    );
    await a.stop({ release: false });
    await waitFor(() => b.isLeader(), { timeoutMs: 3 * LEASE_MS, what: "takeover" });
    const takeover = Date.now() - lastRenewal;
    // B needs up to one retry period to observe the last renewal, then the lease duration, then one more retry.
    expect(takeover).toBeGreaterThanOrEqual(LEASE_MS - RETRY_MS);
    expect(takeover).toBeLessThanOrEqual(LEASE_MS + 3 * RETRY_MS * 1.2 + 300);
    expect((await lease("failover")).spec?.leaseTransitions).toBe(1);
    expectNoOverlap();
  });

  it("a leader cut off from the API server stops at its renew deadline, before anyone else starts", async () => {
    const a = await leader("cut-a", "partition");
    const b = started("cut-b", "partition");
    await sleep(2 * RETRY_MS);
    const cutAt = performance.now();
    const heal = api.inject({ user: "cut-a", status: 503 });
    await waitFor(() => b.isLeader(), { timeoutMs: 4 * LEASE_MS, what: "takeover" });
    heal();
    const aTerm = terms.find((t) => t.who === "cut-a");
    expect(aTerm?.end).toBeDefined();
    // The deadline counts from the last renewal sent before the cut; allow for timer lateness.
    expect((aTerm?.end as number) - cutAt).toBeLessThanOrEqual(RENEW_DEADLINE_MS + 150);
    expectNoOverlap();
    // Healed, A stays a follower while B renews.
    await sleep(3 * RETRY_MS);
    expect(a.isLeader()).toBe(false);
    expect(a.leader()).toBe("cut-b");
  });

  it("with keepRoleWhileUnconfirmed, a cut-off leader keeps its role until it sees another holder, then hands over", async () => {
    const a = candidate("sticky-a", "sticky", { keepRoleWhileUnconfirmed: true });
    a.start();
    await waitFor(() => a.isLeader(), { timeoutMs: 4 * LEASE_MS, what: "a leads" });
    const b = started("sticky-b", "sticky");
    const heal = api.inject({ user: "sticky-a", status: 503 });
    await waitFor(() => b.isLeader(), { timeoutMs: 6 * LEASE_MS, what: "b takes the expired lease" });
    expect(a.isLeader()).toBe(true); // no answer from the API server proves nothing: keep watching
    heal();
    await waitFor(() => !a.isLeader(), { timeoutMs: 4 * LEASE_MS, what: "a sees b and stops" });
    expect(a.leader()).toBe("sticky-b");
    expect(b.isLeader()).toBe(true);
  });

  it("a renewal that hangs past the deadline stops the role without waiting for the answer", async () => {
    const a = await leader("slow-a", "slow");
    const b = started("slow-b", "slow");
    const slowFrom = performance.now();
    const fix = api.inject({ user: "slow-a", verb: "update", delayMs: 3 * LEASE_MS });
    await waitFor(() => !a.isLeader(), { timeoutMs: 2 * LEASE_MS, what: "A to step down" });
    expect(performance.now() - slowFrom).toBeLessThanOrEqual(RENEW_DEADLINE_MS + 150);
    await waitFor(() => b.isLeader(), { timeoutMs: 4 * LEASE_MS, what: "takeover" });
    fix();
    expectNoOverlap();
  });

  it("keeps leading through an API server restart shorter than the renew deadline", async () => {
    const a = await leader("steady", "restart");
    await api.restart({ downtimeMs: 200 });
    await sleep(4 * RETRY_MS);
    expect(a.isLeader()).toBe(true);
    expect(terms).toHaveLength(1);
    expect(terms[0]?.end).toBeUndefined();
  });

  it("hands over at once when the leader releases on shutdown", async () => {
    const a = await leader("rel-a", "release");
    const b = started("rel-b", "release");
    await sleep(2 * RETRY_MS);
    const stopAt = performance.now();
    await a.stop();
    await waitFor(() => b.isLeader(), { timeoutMs: 2 * LEASE_MS });
    // Well under the lease duration: B did not wait for expiry.
    expect(performance.now() - stopAt).toBeLessThan(LEASE_MS - RETRY_MS);
    expectNoOverlap();
  });

  it("releases on shutdown even when a renewal it stopped waiting for was written after all", async () => {
    const a = await leader("late-a", "late");
    // A renewal the server answers late (held by the proxy for two retry periods): stop() waits one
    // retry period for it, then releases from the record it had; the renewal lands first.
    let stopping = false;
    const holdRenewal = api.inject({
      user: "late-a",
      verb: "update",
      delayMs: 2 * RETRY_MS,
      times: 1,
      when: () => !stopping,
    });
    const holdRelease = api.inject({
      user: "late-a",
      verb: "update",
      delayMs: 3 * RETRY_MS,
      times: 1,
      when: () => stopping,
    });
    const injectedAt = Date.now();
    await waitFor(
      () => api.requests.some((r) => r.user === "late-a" && r.verb === "update" && r.time >= injectedAt),
      {
        what: "a renewal held",
      },
    );
    stopping = true;
    await a.stop();
    holdRenewal();
    holdRelease();
    const updates = api.requests.filter(
      (r) => r.user === "late-a" && r.verb === "update" && r.time >= injectedAt,
    );
    expect(updates.length).toBeGreaterThanOrEqual(2);
    expect((await lease("late")).spec?.holderIdentity).toBe("");
  });

  it("keeps one leader at a time among several candidates under random faults", async () => {
    const names = ["c1", "c2", "c3", "c4"];
    for (const n of names) started(n, "crowd");
    const until = performance.now() + 3000;
    while (performance.now() < until) {
      const victim = names[Math.floor(Math.random() * names.length)] as string;
      const heal = api.inject(
        Math.random() < 0.5
          ? { user: victim, status: 500 }
          : { user: victim, verb: "update", delayMs: 0.9 * LEASE_MS },
      );
      await sleep(250 + Math.random() * 400);
      heal();
    }
    await Promise.all(electors.splice(0).map((e) => e.stop({ release: false })));
    expect(terms.length).toBeGreaterThanOrEqual(1);
    expectNoOverlap();
  });

  it("refuses timings where a lost renewal could outlive the lease", () => {
    let err: unknown;
    try {
      candidate("bad", "bad", { leaseDurationMs: 1000, renewDeadlineMs: 1000 });
    } catch (e) {
      err = e;
    }
    expect(isHiveError(err, "ConfigInvalid")).toBe(true);
    // A failed renewal must leave room for a retry before the deadline.
    expect(() => candidate("bad", "bad", { renewPeriodMs: RENEW_DEADLINE_MS - RETRY_MS })).toThrow(
      /a failed renewal must leave time for a retry/,
    );
  });
});
