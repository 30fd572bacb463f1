/**
 * Where a tenant's alerts may go. A HivePolicy outside the monitor's namespace makes every
 * agent POST to its traps' `callback`: a request-forgery path into the cluster network unless
 * limited. One rule, used by the admission policy (as CEL) and by the agent (before any
 * request): the monitor's own callback, or a URL under one of the monitor's tenant prefixes.
 */

/**
 * A prefix as it is compared: a bare origin gets its "/" so that `https://alerts.example`
 * never admits `https://alerts.example.evil.io`.
 */
export function normalizeCallbackPrefix(prefix: string): string {
  const { origin, pathname } = new URL(prefix);
  return pathname === "/" && !prefix.endsWith("/") ? `${origin}/` : prefix;
}

export function tenantCallbackAllowed(
  url: string,
  monitorCallback: string | undefined,
  prefixes: readonly string[],
): boolean {
  return url === monitorCallback || prefixes.some((p) => url.startsWith(normalizeCallbackPrefix(p)));
}

/** A CEL string literal of `text`: whatever a URL holds (`'`, `\\`, line breaks) stays data. */
export function celString(text: string): string {
  const escaped = text.replace(
    /[\\'\n\r]/g,
    (c) => ({ "\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r" })[c] ?? c,
  );
  return `'${escaped}'`;
}

/** The same rule as a CEL expression over `value` (a string). */
export function tenantCallbackCel(
  value: string,
  monitorCallback: string | undefined,
  prefixes: readonly string[],
): string {
  const allowed = [
    ...(monitorCallback === undefined ? [] : [`${value} == ${celString(monitorCallback)}`]),
    ...prefixes.map((p) => `${value}.startsWith(${celString(normalizeCallbackPrefix(p))})`),
  ];
  return allowed.length === 0 ? "false" : allowed.join(" || ");
}
