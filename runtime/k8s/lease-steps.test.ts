/** Unit tests of the elector's pure steps: timing checks, who may hold the Lease, the records written. */
import type { V1Lease, V1MicroTime } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { heldLease, isHeldByAnother, leaseSeconds, newLease, releasedLease } from "./lease-records.ts";
import { DEFAULT_LEASE, electionTiming } from "./lease-timing.ts";

const t0 = new Date(1_000) as V1MicroTime;
const t1 = new Date(2_000) as V1MicroTime;
const held = (holder: string, transitions = 3): V1Lease => ({
  metadata: { name: "l", namespace: "ns", resourceVersion: "7" },
  spec: {
    holderIdentity: holder,
    acquireTime: t0,
    renewTime: t0,
    leaseTransitions: transitions,
    leaseDurationSeconds: 15,
  },
});

describe("election timing", () => {
  it("fills in the defaults, renewing every retry period unless told", () => {
    expect(electionTiming({ namespace: "ns", name: "l" })).toEqual({
      ...DEFAULT_LEASE,
      renewPeriodMs: DEFAULT_LEASE.retryPeriodMs,
    });
    expect(
      electionTiming({
        namespace: "ns",
        name: "l",
        leaseDurationMs: 15_000,
        renewDeadlineMs: 10_000,
        retryPeriodMs: 2_000,
      }),
    ).toEqual({
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      renewPeriodMs: 2_000,
    });
  });

  it("refuses a deadline past the lease, and periods that leave no retry before the deadline", () => {
    const base = { namespace: "ns", name: "l", leaseDurationMs: 15_000, retryPeriodMs: 2_000 };
    expect(() => electionTiming({ ...base, renewDeadlineMs: 15_000 })).toThrow(
      /shorter than the lease duration/,
    );
    expect(() => electionTiming({ ...base, renewDeadlineMs: 10_000, renewPeriodMs: 7_000 })).toThrow(
      /time for a retry/,
    );
  });
});

describe("lease records", () => {
  it("counts a holder as keeping the Lease only within the lease duration of its last change", () => {
    expect(isHeldByAnother("b", "a", 1_000, 15_999, 15_000)).toBe(true);
    expect(isHeldByAnother("b", "a", 1_000, 16_000, 15_000)).toBe(false);
    expect(isHeldByAnother("", "a", 1_000, 1_001, 15_000)).toBe(false);
    expect(isHeldByAnother("a", "a", 1_000, 1_001, 15_000)).toBe(false);
  });

  it("rounds the lease duration up to whole seconds, at least one", () => {
    expect([leaseSeconds(15_000), leaseSeconds(1_500), leaseSeconds(10)]).toEqual([15, 2, 1]);
  });

  it("creates a Lease held from now with no transitions", () => {
    expect(
      newLease({ name: "l", namespace: "ns", identity: "a", leaseDurationSeconds: 15 }, t1).spec,
    ).toEqual({
      holderIdentity: "a",
      leaseDurationSeconds: 15,
      acquireTime: t1,
      renewTime: t1,
      leaseTransitions: 0,
    });
  });

  it("renews its own Lease keeping acquireTime, and takes another's as a new transition", () => {
    const renewed = heldLease(held("a"), "a", 15, t1);
    expect(renewed.metadata?.resourceVersion).toBe("7");
    expect(renewed.spec).toMatchObject({ acquireTime: t0, renewTime: t1, leaseTransitions: 3 });
    expect(heldLease(held("b"), "a", 15, t1).spec).toMatchObject({
      holderIdentity: "a",
      acquireTime: t1,
      leaseTransitions: 4,
    });
  });

  it("releases to nobody over the same version, expiring in a second", () => {
    const released = releasedLease(held("a"), t1);
    expect(released.metadata?.resourceVersion).toBe("7");
    expect(released.spec).toMatchObject({
      holderIdentity: "",
      leaseDurationSeconds: 1,
      leaseTransitions: 3,
      renewTime: t1,
    });
  });
});
