/**
 * A trigger that fires at most once per interval, however often it is asked: the asks within an
 * interval are folded into one firing at its end. For inputs that anyone who can write an object
 * can repeat at will (another node's re-resolve requests on HiveData), so that each cannot cost a
 * full pass on every node.
 */
export interface PacedTrigger {
  /** Fires now, or at the end of the current interval; false when folded into that later firing. */
  request(): boolean;
  /** How many asks were folded into a later firing. */
  readonly folded: number;
  stop(): void;
}

export function createPacedTrigger(fire: () => void, intervalMs: number): PacedTrigger {
  let lastAt = Number.NEGATIVE_INFINITY;
  let timer: NodeJS.Timeout | undefined;
  let folded = 0;
  const fireNow = () => {
    timer = undefined;
    lastAt = performance.now();
    fire();
  };
  return {
    request() {
      const wait = lastAt + intervalMs - performance.now();
      if (wait <= 0 && !timer) {
        fireNow();
        return true;
      }
      folded += 1;
      timer ??= setTimeout(fireNow, Math.max(0, wait));
      return false;
    },
    get folded() {
      return folded;
    },
    stop() {
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
  };
}
