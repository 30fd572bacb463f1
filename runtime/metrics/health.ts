/**
 * Liveness and readiness checks, registered by the parts of the agent that know their own
 * state (the loader: "program attached"; the informers: "synced"; the alerts pipeline:
 * "spool writable"). The metrics server serves them as /healthz and /readyz.
 */
export interface CheckResult {
  ok: boolean;
  /** Shown in the verbose report and logged when the check fails. */
  message?: string;
}

export type Check = () => CheckResult | boolean | Promise<CheckResult | boolean>;

export interface HealthReport {
  ok: boolean;
  checks: { name: string; ok: boolean; message?: string }[];
}

export interface Health {
  /** Ready = the agent does its job (gates rollouts). Replaces a check of the same name. */
  addReadinessCheck(name: string, check: Check): void;
  /** Live = not stuck (a failure makes the kubelet restart the container). Keep these cheap and certain. */
  addLivenessCheck(name: string, check: Check): void;
  readiness(): Promise<HealthReport>;
  liveness(): Promise<HealthReport>;
}

/** A check that takes longer than this counts as failed, so a probe never hangs. */
const CHECK_TIMEOUT_MS = 2_000;

async function runOne(name: string, check: Check): Promise<{ name: string; ok: boolean; message?: string }> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<CheckResult>((resolve) => {
      timer = setTimeout(
        () => resolve({ ok: false, message: `check took longer than ${CHECK_TIMEOUT_MS} ms` }),
        CHECK_TIMEOUT_MS,
      );
    });
    const raw = await Promise.race([Promise.resolve().then(check), timeout]);
    const result = typeof raw === "boolean" ? { ok: raw } : raw;
    return result.message === undefined
      ? { name, ok: result.ok }
      : { name, ok: result.ok, message: result.message };
  } catch (error) {
    return { name, ok: false, message: error instanceof Error ? error.message : String(error) };
  } finally {
    clearTimeout(timer);
  }
}

export function createHealth(): Health {
  const readiness = new Map<string, Check>();
  const liveness = new Map<string, Check>();
  const run = async (checks: Map<string, Check>): Promise<HealthReport> => {
    const results = await Promise.all([...checks].map(([name, check]) => runOne(name, check)));
    return { ok: results.every((r) => r.ok), checks: results };
  };
  return {
    addReadinessCheck: (name, check) => void readiness.set(name, check),
    addLivenessCheck: (name, check) => void liveness.set(name, check),
    readiness: () => run(readiness),
    liveness: () => run(liveness),
  };
}
