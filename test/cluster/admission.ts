/**
 * ValidatingAdmissionPolicy denials as a real kube-apiserver answers them. A policy and its binding
 * just applied are enforced only once the server's admission plugin has loaded and compiled them
 * (about a second after `kubectl apply` here): a test that relies on a denial waits for it first.
 */
import { statusOf, waitFor } from "./testing.ts";

export interface PolicyDenial {
  policy: string;
  message: string;
}

/** The policy and its message in a refused request's Status message, or undefined for another refusal. */
export function policyDenial(statusMessage: string): PolicyDenial | undefined {
  const m = /ValidatingAdmissionPolicy '([^']+)' with binding '[^']+' denied request: (.*)$/s.exec(
    statusMessage,
  );
  return m ? { policy: m[1] as string, message: m[2] as string } : undefined;
}

/**
 * Waits until `policy` is enforced: `probe` sends a request the policy must deny (a dry run is
 * best), again and again until the server refuses it in that policy's name.
 */
export async function untilEnforced(
  policy: string,
  probe: () => Promise<unknown>,
  timeoutMs = 30_000,
): Promise<PolicyDenial> {
  return waitFor(
    async () => {
      try {
        await probe();
        return undefined;
      } catch (err) {
        const denial = policyDenial(statusOf(err).message ?? "");
        if (denial?.policy === policy) return denial;
        if (denial === undefined) throw err;
        return undefined;
      }
    },
    { timeoutMs, intervalMs: 100, what: `ValidatingAdmissionPolicy ${policy} enforced` },
  );
}
