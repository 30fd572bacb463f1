/**
 * What a QEMU guest and the host test share about the host's API server (guest-api.ts on the host,
 * guest-client.ts in the guest): the address the guest reaches it at, the environment carrying its
 * URL, CA and the admin's token, and the requests the guest writes to /hive-out for the host.
 */
import type { HiveMonitorArgs } from "../../component/index.ts";
import type { FaultRule } from "./fault-proxy.ts";

/** The address the guest reaches the API server at (a QEMU guestfwd, never routed anywhere else). */
export const GUEST_API_HOST = "10.0.2.100";
export const GUEST_API_PORT = 6443;
export const GUEST_API_URL = `https://${GUEST_API_HOST}:${GUEST_API_PORT}`;
/** The guest's own address on QEMU's user-mode network. */
export const GUEST_ADDRESS = "10.0.2.15";
/** Environment variable carrying GuestApiConfig (JSON) into the guest. */
export const GUEST_API_ENV = "HIVE_GUEST_API";
/** Directories of /hive-out holding the guest's requests and the host's answers. */
export const REQUEST_DIR = "host-requests";
export const ANSWER_DIR = "host-answers";

export interface GuestApiConfig {
  url: string;
  caPem: string;
  adminToken: string;
}

/** A fault rule as the guest can send it: no function, a substring of the query instead. */
export type GuestFaultRule = Omit<FaultRule, "when"> & { queryIncludes?: string };

/** What the guest may ask of the host, and the answers. */
export interface GuestRequests {
  install: { args: { args: HiveMonitorArgs }; answer: { namespace: string; agentUser: string } };
  agentToken: { args: { node: string; pod: string }; answer: { token: string } };
  /** Cuts the proxy now (connections and watches end), listening again after downtimeMs. */
  outage: { args: { downtimeMs: number }; answer: { id: number } };
  /** Answers once that outage is over. */
  outageOver: { args: { id: number }; answer: Record<string, never> };
  inject: { args: { rule: GuestFaultRule }; answer: { id: number } };
  removeInjection: { args: { id: number }; answer: Record<string, never> };
}
export type GuestRequest = {
  [K in keyof GuestRequests]: { op: K; args: GuestRequests[K]["args"] };
}[keyof GuestRequests];
export type GuestAnswer = { ok: true; value: unknown } | { ok: false; error: string };
