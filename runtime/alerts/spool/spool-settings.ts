/**
 * The spool's bounds and timings with their defaults applied (SpoolOptions in spool.ts says
 * what each means).
 */
export interface SpoolSettings {
  maxBytes: number;
  /** Bytes one destination's segments may hold. */
  quotaBytes: number;
  segmentBytes: number;
  fsyncIntervalMs: number;
  maxUnwrittenBytes: number;
  retryWriteMs: number;
}

export function spoolSettings(options: {
  maxBytes?: number;
  destinationQuotaBytes?: number;
  segmentBytes?: number;
  fsyncIntervalMs?: number;
  maxUnwrittenBytes?: number;
  retryWriteMs?: number;
}): SpoolSettings {
  const maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
  return {
    maxBytes,
    quotaBytes: options.destinationQuotaBytes ?? maxBytes,
    segmentBytes: Math.max(4096, options.segmentBytes ?? Math.floor(maxBytes / 16)),
    fsyncIntervalMs: options.fsyncIntervalMs ?? 1000,
    // A quarter at most: memory for unwritten records never rivals the spool itself.
    maxUnwrittenBytes: Math.min(options.maxUnwrittenBytes ?? 8 * 1024 * 1024, maxBytes / 4),
    retryWriteMs: options.retryWriteMs ?? 1000,
  };
}
