/**
 * Where a tenant's alerts may go. A HivePolicy outside the monitor's namespace makes every
 * agent POST to its traps' `callback`: a request-forgery path into the cluster network unless
 * limited. One rule, used by the admission policy (as CEL) and by the agent (before any
 * request): a tenant trap names a callback only under one of the monitor's tenant prefixes;
 * without one its alerts go to the monitor's callback, which no policy ever names.
 *
 * The rule compares the URL the HTTP client will send, not the text as written: a callback
 * must already be in the form WHATWG URL parsing gives it (no dot segments to resolve, no
 * userinfo, nothing left to encode), and may not hold encoded dots, slashes or backslashes a
 * server could decode into a path outside the prefix (`…/teams/a/%2e%2e/admin`, `..%2fadmin`).
 */

/**
 * Refused anywhere in a callback: JavaScript and RE2 read these the same, so the agent and the
 * admission policy's CEL `matches` refuse the same strings.
 */
const REFUSED_PATTERNS: readonly string[] = [
  // Encoded ".", "/" and "\": a server may decode them into dot segments or separators.
  "%(2[eEfF]|5[cC])",
  // A dot segment ("/./", "/../", or at the end of the path): URL parsing would remove it.
  "/[.][.]?([/?#]|$)",
  // Anything but the characters a URL carries unencoded (RFC 3986), except "'" and "\"
  // (URL parsing encodes the first in a query and reads the second as "/").
  "[^-A-Za-z0-9._~:/?#\\[\\]@!$&()*+,;=%]",
];

/**
 * A prefix as it is compared: a bare origin gets its "/" so that `https://alerts.example`
 * never admits `https://alerts.example.evil.io`.
 */
export function normalizeCallbackPrefix(prefix: string): string {
  const { origin, pathname } = new URL(prefix);
  return pathname === "/" && !prefix.endsWith("/") ? `${origin}/` : prefix;
}

/** A URL exactly as `new URL` writes it (a bare origin may omit its "/"), or undefined. */
function canonicalHref(url: string): URL | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") return undefined;
  if (parsed.username !== "" || parsed.password !== "") return undefined;
  if (REFUSED_PATTERNS.some((p) => new RegExp(p).test(url))) return undefined;
  const bareOrigin = parsed.href === `${url}/` && parsed.pathname === "/";
  return parsed.href === url || bareOrigin ? parsed : undefined;
}

/** Why `prefix` cannot serve as a tenant callback prefix, or undefined when it can. */
export function callbackPrefixProblem(prefix: string): string | undefined {
  const parsed = canonicalHref(prefix);
  if (parsed === undefined)
    return "must be an http:// or https:// URL written as URL parsing writes it (lowercase host, no default port, no userinfo, no dot segments or encoded dots, slashes or quotes)";
  if (parsed.search !== "" || parsed.hash !== "" || prefix.includes("?") || prefix.includes("#"))
    return "must end in a path: no query or fragment";
  return undefined;
}

/**
 * What a URL under `prefix` is, path segment by segment: the prefix itself (a bare origin also
 * without its "/"), or the prefix followed by "/" or "?" (a prefix ending in "/" by anything).
 */
function prefixForms(prefix: string): { exact: string[]; starts: string[] } {
  const p = normalizeCallbackPrefix(prefix);
  const { origin, pathname } = new URL(p);
  const exact = pathname === "/" ? [p, origin] : [p];
  return { exact, starts: p.endsWith("/") ? [p] : [`${p}/`, `${p}?`] };
}

export function tenantCallbackAllowed(url: string, prefixes: readonly string[]): boolean {
  if (canonicalHref(url) === undefined) return false;
  return prefixes.some((p) => {
    const { exact, starts } = prefixForms(p);
    return exact.includes(url) || starts.some((s) => url.startsWith(s));
  });
}

/** A CEL string literal of `text`: whatever a URL holds (`'`, `\\`, line breaks) stays data. */
export function celString(text: string): string {
  const escaped = text.replace(
    /[\\'\n\r]/g,
    (c) => ({ "\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r" })[c] ?? c,
  );
  return `'${escaped}'`;
}

/**
 * The same rule as a CEL expression over `value` (a string). Since every prefix is canonical
 * (callbackPrefixProblem) and a callback must start with one up to a "/" or "?", its scheme,
 * host and port are the prefix's: the refused patterns are all that is left of URL parsing.
 */
export function tenantCallbackCel(value: string, prefixes: readonly string[]): string {
  if (prefixes.length === 0) return "false";
  const under = prefixes.flatMap((p) => {
    const { exact, starts } = prefixForms(p);
    return [
      ...exact.map((e) => `${value} == ${celString(e)}`),
      ...starts.map((s) => `${value}.startsWith(${celString(s)})`),
    ];
  });
  const refused = REFUSED_PATTERNS.map((p) => `!${value}.matches(${celString(p)})`);
  return `${refused.join(" && ")} && (${under.join(" || ")})`;
}
