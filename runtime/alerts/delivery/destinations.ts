/**
 * The monitor's callback settings → the dispatcher's per-URL-prefix options, with the
 * secrets read from Kubernetes once at agent start. Secrets apply only to the URL prefixes
 * named here (by default the default callback's origin), never to any URL a policy author
 * writes into a trap.
 */

import { HiveError } from "../../../api/errors.ts";
import type { CoreApi } from "../../k8s/kube-apis.ts";
import type { AlertFormat, DestinationOptions } from "./dispatcher.ts";
import { loadSecretHeaders, loadSecretValue } from "./secret-headers.ts";

export interface CallbackSettings {
  /** The monitor's default callback URL. */
  defaultCallback?: string;
  /** Secret whose data keys are extra request headers (e.g. Authorization). */
  headersSecret?: { namespace: string; name: string };
  /** Secret holding the HMAC-SHA256 key under `key` (default "hmac-key"). */
  signingSecret?: { namespace: string; name: string; key?: string };
  /** Body format for these URLs; default "json". */
  format?: AlertFormat;
  /** URL prefixes the secrets and format apply to; default: the default callback's origin + "/". */
  urlPrefixes?: string[];
}

export async function resolveDestinations(
  core: CoreApi | undefined,
  settings: CallbackSettings,
): Promise<DestinationOptions[]> {
  const prefixes =
    settings.urlPrefixes ??
    (settings.defaultCallback ? [`${new URL(settings.defaultCallback).origin}/`] : []);
  const needsSecrets = settings.headersSecret || settings.signingSecret;
  if (prefixes.length === 0) {
    if (needsSecrets) {
      throw new HiveError("ConfigInvalid", "callback secrets are configured but no URL they may be sent to", {
        object: "callback settings",
        hint: "set the monitor's default callback or list the URL prefixes the secrets are for",
      });
    }
    return [];
  }
  if (needsSecrets && !core) {
    throw new HiveError("ConfigInvalid", "callback secrets need a Kubernetes API client", {
      object: "callback settings",
    });
  }
  const headers = settings.headersSecret
    ? await loadSecretHeaders(core as CoreApi, settings.headersSecret.namespace, settings.headersSecret.name)
    : undefined;
  const key = settings.signingSecret
    ? await loadSecretValue(
        core as CoreApi,
        settings.signingSecret.namespace,
        settings.signingSecret.name,
        settings.signingSecret.key ?? "hmac-key",
      )
    : undefined;
  return prefixes.map((urlPrefix) => ({
    urlPrefix,
    ...(headers ? { headers } : {}),
    ...(key ? { hmacSecrets: [key] } : {}),
    ...(settings.format ? { format: settings.format } : {}),
  }));
}
