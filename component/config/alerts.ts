/** Where alerts go and what they carry: `callback`, `clusterName` and `tenantCallbacks`. */
import { FORMATS } from "../../api/formats.ts";
import { CALLBACK_FORMATS } from "../../api/index.ts";
import { callbackPrefixProblem, normalizeCallbackPrefix } from "../../api/tenancy.ts";
import type { CallbackValues, HiveMonitorValues } from "../args.ts";
import { CALLBACK_SECRET } from "../builders/callback-secret.ts";
import { isPlainObject, unknownKeys } from "../builders/traps.ts";
import { type Checker, DNS_SUBDOMAIN, LABEL_VALUE, SECRET_KEY } from "./checker.ts";
import type { HiveConfig } from "./hive-config.ts";

export function checkAlertOptions(
  c: Checker,
  args: HiveMonitorValues,
): Pick<HiveConfig, "callback" | "clusterName" | "tenantCallbacks"> {
  const callback = checkCallback(c, args.callback);
  checkClusterName(c, args.clusterName);
  const tenantCallbacks = checkTenantCallbacks(c, args.tenantCallbacks);
  return { callback, clusterName: args.clusterName, tenantCallbacks };
}

function checkCallback(c: Checker, value: unknown): CallbackValues | undefined {
  if (value === undefined) return undefined;
  const url = FORMATS["http-url"];
  // A URL alone is short for { url }.
  if (typeof value === "string") {
    if (!url?.(value)) c.add("callback", `${JSON.stringify(value)} must be an http:// or https:// URL`);
    return { url: value };
  }
  if (!isPlainObject(value)) {
    c.add(
      "callback",
      'must be a URL or an object such as { url: "https://alerts.example.com/hive", headersSecret: "hive-callback" }',
    );
    return undefined;
  }
  c.problems.push(
    ...unknownKeys(value, ["url", "urlSecret", "headersSecret", "signingSecret", "format"], "callback"),
  );
  const cb = value as unknown as CallbackValues;
  if (cb.format !== undefined) c.oneOf("callback.format", cb.format, CALLBACK_FORMATS);
  if (cb.urlSecret !== undefined) {
    if (cb.url !== undefined) c.add("callback.urlSecret", "goes instead of callback.url: give one of them");
    secretKeyRef(c, "callback.urlSecret", cb.urlSecret);
  } else if (typeof cb.url !== "string" || !url?.(cb.url)) {
    c.add(
      "callback.url",
      `${JSON.stringify(cb.url)} must be an http:// or https:// URL (or give urlSecret: { name, key })`,
    );
  } else {
    // The component writes its own Secret for the URL: a user's Secret of that name would be overwritten.
    for (const [option, name] of [
      ["callback.headersSecret", cb.headersSecret],
      ["callback.signingSecret.name", cb.signingSecret?.name],
    ] as const) {
      if (name === CALLBACK_SECRET.name)
        c.add(option, `"${name}" is the Secret the monitor writes for callback.url; name another`);
    }
  }
  if (cb.headersSecret !== undefined) {
    c.name(
      "callback.headersSecret",
      cb.headersSecret,
      DNS_SUBDOMAIN,
      "a Secret name in the monitor's namespace",
    );
  }
  if (cb.signingSecret !== undefined) secretKeyRef(c, "callback.signingSecret", cb.signingSecret);
  return cb;
}

function secretKeyRef(c: Checker, option: string, value: unknown): void {
  if (!isPlainObject(value)) {
    c.add(option, 'must be { name: "secret-name", key: "key-in-secret" }');
    return;
  }
  c.problems.push(...unknownKeys(value, ["name", "key"], option));
  c.name(`${option}.name`, value.name, DNS_SUBDOMAIN, "a Secret name");
  c.name(`${option}.key`, value.key, SECRET_KEY, "a key of a Secret (letters, digits, - _ .)");
}

/** Passed to the agent as an argument and used as an Alertmanager label value: a label value's form. */
function checkClusterName(c: Checker, value: string | undefined): void {
  if (value !== undefined && (value === "" || !LABEL_VALUE.test(value)))
    c.add(
      "clusterName",
      `${JSON.stringify(value)} must be letters, digits, "-", "_" and "." (at most 63), e.g. "prod-eu-1"`,
    );
}

function checkTenantCallbacks(c: Checker, value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    c.add("tenantCallbacks", 'must be a list of URL prefixes such as ["https://alerts.example.com/teams/"]');
    return [];
  }
  const out: string[] = [];
  for (const [i, p] of value.entries()) {
    // Compared with callbacks as URL parsing writes them (api/tenancy.ts): a prefix in another
    // form would match nothing, or less than it reads.
    const problem = typeof p === "string" ? callbackPrefixProblem(p) : "must be an http:// or https:// URL";
    if (problem !== undefined) c.add(`tenantCallbacks[${i}]`, `${JSON.stringify(p)} ${problem}`);
    else out.push(normalizeCallbackPrefix(p));
  }
  return out;
}
