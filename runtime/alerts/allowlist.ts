/**
 * The allowlist matcher: does one access match an entry of its trap's `allow` list
 * (api/policy.ts AllowEntrySchema)? Pure, and decided only on what the kernel recorded at
 * the access (KernelEvent.process, runtime/kernel/contract.ts) — never `comm`, never a
 * later /proc read.
 *
 * Fail closed, everywhere: an executable the kernel did not know (`source: "unknown"`, no
 * `exe`), a path it truncated, a missing parent, or a pattern that validation would have
 * refused never matches. An entry matches only when every field it has matches:
 * - `exe` / `parent-exe`: path equality, or — for a pattern ending in `*` — the path starts
 *   with what precedes the `*` (`/usr/lib/openssh/*` matches `/usr/lib/openssh/sftp-server`
 *   and anything deeper). Equality is on the kernel-resolved path, so a copy of `sshd` at
 *   `/tmp/sshd` is not `/usr/sbin/sshd`.
 * - `accesses`: every access kind of the event is among the entry's kinds (an open+read is
 *   allowed by `[read, open]`, not by `[read]`); an event with no decoded kind is not within
 *   any list, so only entries without `accesses` can allow it.
 */
import type { AccessKind } from "../../api/meta.ts";
import type { AllowEntry } from "../../api/policy.ts";
import type { ExecIdentity, KernelEvent } from "../kernel/contract.ts";

/** What the matcher reads of an event. */
export type AllowSubject = Pick<KernelEvent, "accesses"> & { process?: KernelEvent["process"] };

/** True when the kernel-recorded executable `identity` is the one `pattern` names. */
export function exeMatches(pattern: string, identity: ExecIdentity | undefined): boolean {
  if (identity === undefined || identity.source === "unknown" || identity.truncated === true) return false;
  const exe = identity.exe;
  if (typeof exe !== "string" || !exe.startsWith("/")) return false;
  // A pattern the schema refuses (relative, `*` inside) matches nothing rather than something.
  const star = pattern.indexOf("*");
  if (!pattern.startsWith("/") || (star !== -1 && star !== pattern.length - 1)) return false;
  return star === -1 ? exe === pattern : exe.startsWith(pattern.slice(0, -1));
}

/** True when every kind of the event is among `allowed`. */
function accessesWithin(kinds: readonly AccessKind[], allowed: readonly AccessKind[]): boolean {
  return kinds.length > 0 && kinds.every((kind) => allowed.includes(kind));
}

/** True when `event` matches every field `entry` has; an entry naming no executable matches nothing. */
export function entryMatches(entry: AllowEntry, event: AllowSubject): boolean {
  const exe = entry.exe;
  const parentExe = entry["parent-exe"];
  if (exe === undefined && parentExe === undefined) return false;
  if (exe !== undefined && !exeMatches(exe, event.process?.exe)) return false;
  if (parentExe !== undefined && !exeMatches(parentExe, event.process?.parent?.exe)) return false;
  if (entry.accesses !== undefined && !accessesWithin(event.accesses, entry.accesses)) return false;
  return true;
}

/** Index of the first entry of `allow` that matches `event`; undefined when none does (alert). */
export function allowingEntry(
  allow: readonly AllowEntry[] | undefined,
  event: AllowSubject,
): number | undefined {
  if (allow === undefined) return undefined;
  const index = allow.findIndex((entry) => entryMatches(entry, event));
  return index === -1 ? undefined : index;
}

/** An entry as a short text, for logs and `hive status`: `exe=/usr/bin/passwd accesses=read,write`. */
export function describeEntry(entry: AllowEntry): string {
  const parts: string[] = [];
  if (entry.exe !== undefined) parts.push(`exe=${entry.exe}`);
  if (entry["parent-exe"] !== undefined) parts.push(`parent-exe=${entry["parent-exe"]}`);
  if (entry.accesses !== undefined) parts.push(`accesses=${entry.accesses.join(",")}`);
  return parts.join(" ");
}
