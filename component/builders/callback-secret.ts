/**
 * The monitor's callback URL reaches the agent from a Secret, never from its arguments: a URL
 * often carries a token, and a DaemonSet's args are readable by anyone who may read workloads
 * (`kubectl get ds -o yaml`) and by every process of every node (`ps`). The kubelet resolves
 * the Secret into the agent's environment (HIVE_CALLBACK), so the agent itself needs no new
 * permission. The component writes that Secret unless the user names one of theirs.
 */
import { createHash } from "node:crypto";
import { GROUP } from "../../api/index.ts";
import type { CallbackValues } from "../args.ts";
import { AGENT_NAME, hiveLabels, type KubernetesObject } from "./objects.ts";

/** The Secret the component writes for a `callback.url`, and its key. */
export const CALLBACK_SECRET = { name: `${AGENT_NAME}-callback`, key: "url" } as const;

/** A pod annotation that changes with the URL, so that a new URL rolls the agents (env is read at start). */
export const CALLBACK_CHECKSUM_ANNOTATION = `${GROUP}/callback-checksum`;

/** Where the agent's HIVE_CALLBACK comes from: the user's Secret, or the component's. */
export function callbackSecretRef(
  callback: CallbackValues | undefined,
): { name: string; key: string } | undefined {
  if (callback?.urlSecret) return callback.urlSecret;
  return callback?.url === undefined ? undefined : CALLBACK_SECRET;
}

export function callbackSecretManifest(
  namespace: string,
  callback: CallbackValues | undefined,
): KubernetesObject | undefined {
  if (callback?.url === undefined || callback.urlSecret) return undefined;
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: CALLBACK_SECRET.name, namespace, labels: hiveLabels("agent") },
    type: "Opaque",
    stringData: { [CALLBACK_SECRET.key]: callback.url },
  };
}

/**
 * A digest of the URL, enough to tell that it changed (a user's Secret is theirs to roll out).
 * Not the URL: truncated, it confirms a guess at best, never reveals a token.
 */
export function callbackChecksum(callback: CallbackValues | undefined): string | undefined {
  if (callback?.url === undefined || callback.urlSecret) return undefined;
  return createHash("sha256").update(callback.url).digest("hex").slice(0, 16);
}
