/**
 * The Lease records an elector writes — a new Lease, a takeover or renewal, a release — built
 * from the record it read, so that every write carries that record's resourceVersion (two
 * candidates writing over the same record cannot both succeed: 409).
 */
import type { V1Lease } from "@kubernetes/client-node";
import { V1MicroTime } from "@kubernetes/client-node/dist/types.js";

export function microNow(): V1MicroTime {
  return new V1MicroTime(Date.now());
}

/** The Lease's leaseDurationSeconds: whole seconds, at least 1. */
export function leaseSeconds(leaseDurationMs: number): number {
  return Math.max(1, Math.ceil(leaseDurationMs / 1000));
}

/**
 * True while `holder` (not us, not nobody) keeps the Lease: it changed the record less than the
 * lease duration ago as seen on our own monotonic clock (never its renewTime: clocks differ).
 */
export function isHeldByAnother(
  holder: string,
  identity: string,
  changedAtMs: number,
  nowMs: number,
  leaseDurationMs: number,
): boolean {
  return holder !== "" && holder !== identity && nowMs < changedAtMs + leaseDurationMs;
}

/** A Lease that does not exist yet, held by `identity`. */
export function newLease(
  lease: { name: string; namespace: string; identity: string; leaseDurationSeconds: number },
  now: V1MicroTime,
): V1Lease {
  const { name, namespace, identity, leaseDurationSeconds } = lease;
  return {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name, namespace },
    spec: {
      holderIdentity: identity,
      leaseDurationSeconds,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: 0,
    },
  };
}

/** `current` held by `identity`: a renewal if it already was, else a takeover (one more transition). */
export function heldLease(
  current: V1Lease,
  identity: string,
  leaseDurationSeconds: number,
  now: V1MicroTime,
): V1Lease {
  const holder = current.spec?.holderIdentity ?? "";
  const spec = current.spec ?? {};
  return {
    ...current,
    spec: {
      ...spec,
      holderIdentity: identity,
      leaseDurationSeconds,
      renewTime: now,
      acquireTime: holder === identity && spec.acquireTime ? spec.acquireTime : now,
      leaseTransitions: (spec.leaseTransitions ?? 0) + (holder === identity ? 0 : 1),
    },
  };
}

/** `record` held by nobody, expiring in a second: a successor takes it at once. */
export function releasedLease(record: V1Lease, now: V1MicroTime): V1Lease {
  return {
    ...record,
    spec: {
      ...record.spec,
      holderIdentity: "",
      leaseDurationSeconds: 1,
      renewTime: now,
      acquireTime: now,
    },
  };
}
