/**
 * The agent's settings for the monitor's default callback → the dispatcher's per-URL-prefix
 * options: the body format (`--callback-format`) for the callback and every URL under its origin
 * (a trap's callback beside it reaches the same receiver), and the headers and signing key, read
 * from Secrets in the agent's namespace, for the callback URL itself only.
 */
import type { DestinationOptions } from "../alerts/index.ts";
import { loadSecretHeaders, loadSecretValue } from "../alerts/index.ts";
import type { KubeClients } from "../k8s/kube-client.ts";
import type { AgentConfig } from "./config.ts";

type CallbackConfig = Pick<
  AgentConfig,
  | "callback"
  | "callbackFormat"
  | "callbackHeadersSecret"
  | "callbackSigningSecret"
  | "callbackSigningKey"
  | "namespace"
>;

export async function callbackDestinations(
  config: CallbackConfig,
  clients: Pick<KubeClients, "core">,
): Promise<DestinationOptions[]> {
  if (!config.callback) return [];
  const format = config.callbackFormat === "json" ? {} : { format: config.callbackFormat };
  const destination: DestinationOptions = { urlPrefix: config.callback, ...format };
  if (config.callbackHeadersSecret) {
    destination.headers = await loadSecretHeaders(
      clients.core,
      config.namespace,
      config.callbackHeadersSecret,
    );
  }
  if (config.callbackSigningSecret && config.callbackSigningKey) {
    const key = await loadSecretValue(
      clients.core,
      config.namespace,
      config.callbackSigningSecret,
      config.callbackSigningKey,
    );
    destination.hmacSecrets = [key];
  }
  // The callback as written ("http://alertmanager:9093" has no "/" to be under its origin's
  // prefix), then the rest of its origin, with the format only: secrets stay with the callback.
  const origin = `${new URL(config.callback).origin}/`;
  const list = [destination];
  if (config.callbackFormat !== "json" && origin !== config.callback)
    list.push({ urlPrefix: origin, ...format });
  return list.length === 1 && !destination.headers && !destination.hmacSecrets && !destination.format
    ? []
    : list;
}

/** The Secrets callbackDestinations reads: watched, so a rotation applies without a restart. */
export function callbackSecretNames(config: CallbackConfig): string[] {
  if (!config.callback) return [];
  return [
    config.callbackHeadersSecret,
    config.callbackSigningKey ? config.callbackSigningSecret : undefined,
  ].filter((name): name is string => name !== undefined);
}
