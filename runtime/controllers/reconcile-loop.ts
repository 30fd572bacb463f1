/**
 * The reconcile loop every controller shares: informer events trigger a serial runner that
 * runs the controller's pass; until the informers' first lists are in (`synced`), a pass
 * must not act on what is absent, since absence proves nothing yet.
 */
import { createSerialRunner, type SerialRunner } from "./serial-runner.ts";

/** What every controller exposes besides its `on*` event methods. */
export interface ControllerLifecycle<S> {
  /** Caches are filled: passes may now act on what is absent (deletions, status). */
  markSynced(): void;
  idle(): Promise<void>;
  stats(): S;
  stop(): void;
}

export interface ReconcileLoop<S> {
  readonly runner: SerialRunner;
  synced(): boolean;
  readonly lifecycle: ControllerLifecycle<S>;
}

export function createReconcileLoop<S extends object>(
  pass: () => Promise<void>,
  stats: S,
  options: {
    debounceMs: number;
    /** Called with each pass's duration in seconds (hive_reconcile_duration_seconds). */
    onPass?: ((seconds: number) => void) | undefined;
    onError: (error: unknown) => void;
  },
): ReconcileLoop<S> {
  let synced = false;
  const runner = createSerialRunner(pass, options);
  return {
    runner,
    synced: () => synced,
    lifecycle: {
      markSynced() {
        synced = true;
        runner.trigger();
      },
      idle: () => runner.idle(),
      stats: () => ({ ...stats }),
      stop: () => runner.stop(),
    },
  };
}
