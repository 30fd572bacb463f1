/**
 * What a callback URL is sent with: the extra headers and HMAC keys configured for the
 * URL prefix it falls under (longest prefix wins), and its body format. Secrets are only
 * ever sent to URLs under the prefix they are configured for, so a policy author who
 * points a trap at their own server never receives the monitor's token.
 */
import type { CallbackFormat } from "../../../api/alert.ts";
import { alertmanagerBody, alertmanagerUrl } from "./alertmanager.ts";
import { CLOUDEVENTS_CONTENT_TYPE, cloudEventBody } from "./cloudevents.ts";
import { SIGNATURE_HEADER, signBody } from "./signature.ts";
import { slackBody } from "./slack.ts";

export type AlertFormat = CallbackFormat;

/** How each format turns the alert's JSON into a request: its body, content type and URL. */
const FORMATS: Record<
  AlertFormat,
  { body: (alertJson: string) => string; contentType: string; url?: (url: string) => string }
> = {
  json: { body: (json) => json, contentType: "application/json" },
  cloudevents: { body: cloudEventBody, contentType: CLOUDEVENTS_CONTENT_TYPE },
  alertmanager: { body: alertmanagerBody, contentType: "application/json", url: alertmanagerUrl },
  slack: { body: slackBody, contentType: "application/json" },
};

/** Options for the callbacks under one URL prefix. */
export interface DestinationOptions {
  /** e.g. "https://siem.example.com/hooks/"; matches that URL and URLs below it. */
  urlPrefix: string;
  /** Extra request headers (e.g. Authorization), resolved from a Kubernetes Secret. */
  headers?: Record<string, string>;
  /** HMAC-SHA256 keys; several during a rotation (one `v1=` each in Hive-Signature). */
  hmacSecrets?: (string | Buffer)[];
  /** Body format (api/alert.ts CALLBACK_FORMATS); default "json" (the alert itself). */
  format?: AlertFormat;
  /**
   * Why nothing may be sent under this prefix yet (its Secrets are not read): alerts wait,
   * spooled, and go once the options are set without it. Never sent without their credentials.
   */
  pending?: string;
}

interface ResolvedOptions {
  pending: string | undefined;
  headers: Record<string, string>;
  secrets: (string | Buffer)[];
  format: AlertFormat;
}

/** Headers Hive sets itself: a Secret cannot override them. */
const RESERVED_HEADERS = new Set([
  "content-type",
  "content-length",
  "host",
  "connection",
  "transfer-encoding",
]);

export function urlUnder(url: string, prefix: string): boolean {
  if (!url.startsWith(prefix)) return false;
  if (url.length === prefix.length || prefix.endsWith("/")) return true;
  const next = url[prefix.length];
  return next === "/" || next === "?" || next === "#";
}

/** URL for logs: origin and path, never the query (it may carry a token). */
export function redact(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return "invalid URL";
  }
}

export interface CallbackRequest {
  /** Where to send it: the callback URL, or Alertmanager's alerts path under it. */
  url: string;
  body: Buffer;
  headers: Record<string, string>;
  format: AlertFormat;
}

export interface CallbackOptions {
  /** Replaces the per-prefix options; the next request uses them. */
  set(list: readonly DestinationOptions[]): void;
  /** Why alerts to `url` must wait (DestinationOptions.pending), or undefined when they may go. */
  pendingFor(url: string): string | undefined;
  /** The request for one delivery attempt of an alert to `url`. */
  request(
    url: string,
    alertJson: string,
    meta: { alertId: string; attempt: number; userAgent: string },
  ): CallbackRequest;
}

export function createCallbackOptions(initial: readonly DestinationOptions[] = []): CallbackOptions {
  const byLongestPrefix = (list: readonly DestinationOptions[]) =>
    [...list].sort((a, b) => b.urlPrefix.length - a.urlPrefix.length);
  let prefixes = byLongestPrefix(initial);
  const resolved = new Map<string, ResolvedOptions>();

  const optionsFor = (url: string): ResolvedOptions => {
    let r = resolved.get(url);
    if (r) return r;
    const match = prefixes.find((p) => urlUnder(url, p.urlPrefix));
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(match?.headers ?? {})) {
      const key = k.toLowerCase();
      if (RESERVED_HEADERS.has(key) || key.startsWith("hive-")) continue;
      headers[key] = v;
    }
    r = {
      pending: match?.pending,
      headers,
      secrets: match?.hmacSecrets ?? [],
      format: match?.format ?? "json",
    };
    // Callback URLs come from policies: few, but bound the cache anyway.
    if (resolved.size > 10_000) resolved.clear();
    resolved.set(url, r);
    return r;
  };

  return {
    set(list) {
      prefixes = byLongestPrefix(list);
      resolved.clear();
    },
    pendingFor: (url) => optionsFor(url).pending,
    request(url, alertJson, meta) {
      const opts = optionsFor(url);
      const format = FORMATS[opts.format];
      const body = Buffer.from(format.body(alertJson), "utf8");
      const headers: Record<string, string> = {
        ...opts.headers,
        "content-type": format.contentType,
        "user-agent": meta.userAgent,
        "hive-alert-id": meta.alertId,
        "hive-delivery-attempt": String(meta.attempt),
      };
      if (opts.secrets.length > 0)
        headers[SIGNATURE_HEADER.toLowerCase()] = signBody(opts.secrets, body, Date.now() / 1000);
      return { url: format.url ? format.url(url) : url, body, headers, format: opts.format };
    },
  };
}
