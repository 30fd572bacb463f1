/**
 * Deterministic identities, so that re-discovery is idempotent: the same trap in the same
 * policy always has the same `trap-id`, and the same trap × container always maps to the
 * same HiveData name.
 */
import { createHash } from "node:crypto";
import type { HiveTrap } from "./policy.ts";

/** JSON with object keys sorted, so that equal values hash equally. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/**
 * The `trap-id` label: a hash of what decides WHICH files a trap watches and what they
 * report (policy, path, match, create, mode, accesses, allow). The callback is left out on
 * purpose: changing where alerts go must not re-create every HiveData. `allow` is kept in:
 * two traps on one file that differ only in their allowlists must stay two HiveData, or one
 * trap's allowlist would silence the other's alerts. 40 hex characters fit a label value.
 */
export function trapId(policy: { namespace?: string; name: string }, trap: HiveTrap): string {
  const { callback: _callback, ...identity } = trap;
  const mode = identity.mode === undefined ? undefined : String(identity.mode).replace(/^0(?=.)/, "");
  return sha256(canonicalJson({ ns: policy.namespace ?? "", policy: policy.name, ...identity, mode })).slice(
    0,
    40,
  );
}

/** Name of the HiveData for one trap × container: `hive-data-<pod>-<hash>` (a DNS subdomain). */
export function dataName(trap: string, containerId: string, podName = "host"): string {
  const hash = sha256(`${trap}\n${containerId}`).slice(0, 16);
  const pod = podName
    .toLowerCase()
    .replace(/[^a-z0-9.-]/g, "-")
    .slice(0, 40)
    .replace(/[^a-z0-9]+$/, "");
  return pod ? `hive-data-${pod}-${hash}` : `hive-data-${hash}`;
}
