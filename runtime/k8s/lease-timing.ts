/**
 * The timing of a Lease election, and the checks that keep it safe: a leader whose renewals go
 * unconfirmed must stop before any other candidate could see the Lease as expired.
 */
import { HiveError } from "../../api/errors.ts";

export interface LeaseTiming {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /**
   * How long a holder waits after a renewal that succeeded (its idle write rate); default
   * retryPeriodMs. With a retry still possible before the deadline.
   */
  renewPeriodMs?: number;
}

/** Pauses last between 1× and this × their period, so that candidates drift apart. */
export const JITTER = 1.2;

/**
 * Timing from the lease duration alone: renew deadline 2/3 of it, retry period 2/15 (client-go's
 * 15/10/2 s), and a holder renewing every third of it — two attempts fit before the deadline.
 */
export function leaseTiming(leaseDurationMs: number): LeaseTiming {
  return {
    leaseDurationMs,
    renewDeadlineMs: Math.floor((leaseDurationMs * 2) / 3),
    retryPeriodMs: Math.floor((leaseDurationMs * 2) / 15),
    renewPeriodMs: Math.floor(leaseDurationMs / 3),
  };
}

/**
 * The cluster-wide pods Lease: its holder renews every 30 s (2 writes a minute), candidates poll
 * every 12 s (reads). With the kernel Lease's 15 s (loader-election.ts) an idle node writes 4
 * times a minute and the pods holder 6: at most one write per node per 10 s, the kubelet's own
 * rate. The price is a takeover within 90 s of a holder that dies without releasing (the role
 * writes status and finalizers, never alerts).
 */
export const DEFAULT_LEASE: LeaseTiming = leaseTiming(90_000);

/**
 * An election's timing, defaults filled in (DEFAULT_LEASE; renewPeriodMs: retryPeriodMs).
 * Throws ConfigInvalid, naming the Lease, for timings where a lost renewal could outlive it.
 */
export function electionTiming(
  options: Partial<LeaseTiming> & { namespace: string; name: string },
): Required<LeaseTiming> {
  const leaseDurationMs = options.leaseDurationMs ?? DEFAULT_LEASE.leaseDurationMs;
  const renewDeadlineMs = options.renewDeadlineMs ?? DEFAULT_LEASE.renewDeadlineMs;
  const retryPeriodMs = options.retryPeriodMs ?? DEFAULT_LEASE.retryPeriodMs;
  if (!(renewDeadlineMs < leaseDurationMs)) {
    throw new HiveError("ConfigInvalid", "the renew deadline must be shorter than the lease duration", {
      object: `lease ${options.namespace}/${options.name}`,
      hint: `got renewDeadlineMs=${renewDeadlineMs}, leaseDurationMs=${leaseDurationMs}`,
    });
  }
  // Also bounds the retry period alone: a renewal and a retry must both fit before the deadline.
  const renewPeriodMs = options.renewPeriodMs ?? retryPeriodMs;
  if (!((renewPeriodMs + retryPeriodMs) * JITTER < renewDeadlineMs)) {
    throw new HiveError(
      "ConfigInvalid",
      "a failed renewal must leave time for a retry before the renew deadline",
      {
        object: `lease ${options.namespace}/${options.name}`,
        hint: `need (renewPeriodMs + retryPeriodMs) × ${JITTER} < renewDeadlineMs; got renewPeriodMs=${renewPeriodMs}, retryPeriodMs=${retryPeriodMs}, renewDeadlineMs=${renewDeadlineMs}`,
      },
    );
  }
  return { leaseDurationMs, renewDeadlineMs, retryPeriodMs, renewPeriodMs };
}
