/**
 * Retrying a read-modify-write on 409 Conflict, as client-go's retry.RetryOnConflict does: on a real
 * server the controller manager writes objects a test also writes (its TTL controller annotates every
 * new Node), so a replace with the resourceVersion just read can lose that race.
 */
import { statusOf } from "./testing.ts";

export async function retryOnConflict<T>(write: () => Promise<T>, attempts = 5): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await write();
    } catch (err) {
      const conflict = (() => {
        try {
          return statusOf(err).code === 409;
        } catch {
          return false;
        }
      })();
      if (!conflict || i >= attempts) throw err;
      await new Promise((r) => setTimeout(r, 50 * i));
    }
  }
}
