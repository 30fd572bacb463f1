/**
 * Text a container controls (a process's `comm`, executable and file paths, symlink names and
 * targets in error messages) made safe to show where people read it: Kubernetes Events,
 * HivePolicy status, logs. A process may name itself "\n\x1b[31m…" or plant a 4 KiB path of
 * bidi overrides; shown raw, that forges log lines, recolours terminals (`kubectl describe`,
 * `kubectl logs`) or reorders what a reader sees, and an unbounded message bloats API objects.
 *
 * Alerts keep the exact bytes (JSON escapes them and receivers need the exact path); only these
 * human-facing exits go through `displaySafe`.
 */

/** Default bound for one piece of hostile text, in UTF-16 code units after escaping. */
export const DISPLAY_MAX = 1024;

/** What marks text that was cut; it holds no character `displaySafe` escapes (so a second pass keeps it). */
const CUT = "…";

/**
 * Characters escaped: C0 controls (newline, ESC, NUL…), DEL, C1 controls, the Unicode bidi
 * embeddings/overrides/isolates and marks, line/paragraph separators, zero-width characters and
 * the byte-order mark, and lone surrogates (not text; a terminal shows them as anything).
 */
// With the `u` flag a surrogate range matches only a lone surrogate: a valid pair is one code point.
const UNSAFE =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
  /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]/gu;

const NAMED: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

function escapeOne(ch: string): string {
  const named = NAMED[ch];
  if (named) return named;
  const code = ch.charCodeAt(0);
  return code <= 0xff
    ? `\\x${code.toString(16).padStart(2, "0")}`
    : `\\u${code.toString(16).padStart(4, "0")}`;
}

/**
 * `text` as one line of printable characters, at most `max` UTF-16 code units long: control
 * and formatting characters become `\n`, `\x1b`, `\u202e`…; what does not fit is cut at a
 * character boundary and marked with "…". Backslashes are kept as they are, so applying it
 * twice (with the same or a larger bound) changes nothing: every exit may apply it, whatever
 * an earlier step did. Not a reversible encoding: use the alert JSON for the exact bytes.
 */
export function displaySafe(text: string, max: number = DISPLAY_MAX): string {
  const escaped = String(text).replace(UNSAFE, escapeOne);
  if (escaped.length <= max) return escaped;
  if (max <= CUT.length) return CUT.slice(0, Math.max(0, max));
  let end = max - CUT.length;
  // Never split an escape sequence we made, nor a surrogate pair.
  const lastEscape = escaped.lastIndexOf("\\", end);
  if (lastEscape >= 0 && lastEscape > end - 6) {
    const m = /^\\(?:[nrt]|x[0-9a-f]{2}|u[0-9a-f]{4})/.exec(escaped.slice(lastEscape, lastEscape + 6));
    if (m && lastEscape + m[0].length > end) end = lastEscape;
  }
  const code = escaped.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return `${escaped.slice(0, end)}${CUT}`;
}

/**
 * Applies `displaySafe` to every string in a JSON-like value (for structured log fields):
 * strings bounded by `max`, arrays by `maxItems` (the rest counted), depth by `maxDepth`.
 */
export function displaySafeDeep(
  value: unknown,
  max: number = DISPLAY_MAX,
  maxItems = 32,
  maxDepth = 6,
): unknown {
  if (typeof value === "string") return displaySafe(value, max);
  if (value === null || typeof value !== "object") return value;
  const toJSON = (value as { toJSON?: () => unknown }).toJSON;
  if (typeof toJSON === "function") return displaySafeDeep(toJSON.call(value), max, maxItems, maxDepth);
  if (maxDepth <= 0) return "[…]";
  if (Array.isArray(value)) {
    const out = value.slice(0, maxItems).map((v) => displaySafeDeep(v, max, maxItems, maxDepth - 1));
    if (value.length > maxItems) out.push(`… ${value.length - maxItems} more`);
    return out;
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[displaySafe(k, 128)] = displaySafeDeep(v, max, maxItems, maxDepth - 1);
  }
  return out;
}
