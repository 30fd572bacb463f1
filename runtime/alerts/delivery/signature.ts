/**
 * Optional HMAC-SHA256 signature of each delivered body.
 *
 * Header: `Hive-Signature: t=<unix seconds>,v1=<hex>` where
 *   hex = lowercase hex of HMAC-SHA256(key = the secret's bytes, message = "<t>." + body bytes)
 * `t` is the time of this attempt (a retry is signed again with its own time), and the body
 * is the exact bytes of the request body. A receiver recomputes the HMAC over "<t>." + the raw
 * body, compares in constant time, and rejects a `t` older than its tolerance (5 minutes is
 * usual) to stop replays; `Hive-Alert-Id` lets it drop duplicates. More `v1=` entries may
 * appear during secret rotation (one per secret): accept the request when any matches.
 * Documented for receivers in docs/alerts-and-delivery.md ("Authenticating alerts").
 */
import { createHmac } from "node:crypto";

export const SIGNATURE_HEADER = "Hive-Signature";

export function signBody(
  secrets: readonly (string | Buffer)[],
  body: Buffer | string,
  unixSeconds: number,
): string {
  const t = String(Math.floor(unixSeconds));
  const parts = [`t=${t}`];
  for (const secret of secrets) {
    const mac = createHmac("sha256", secret);
    mac.update(`${t}.`);
    mac.update(body);
    parts.push(`v1=${mac.digest("hex")}`);
  }
  return parts.join(",");
}
