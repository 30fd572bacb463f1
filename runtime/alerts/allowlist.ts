/**
 * The allowlist matcher: does one access match an entry of its trap's `allow` list
 * (api/policy.ts AllowEntrySchema)? Pure, and decided only on what the kernel recorded
 * (KernelEvent.process, runtime/kernel/contract.ts) — never `comm`, never a later /proc read.
 *
 * A path names nothing in a container its attacker controls, so an `exe` entry holds only
 * for the image's file at that path, run as the image shipped it:
 * - the kernel-resolved path is the entry's (or, for a pattern ending in `*`, starts with
 *   what precedes the `*`);
 * - the file is an image layer's, unchanged (not written in the container, not a memfd or a
 *   deleted file, not another filesystem's), and for an exact path it is the very file
 *   discover found at that path in the same container (`files`, from the HiveData);
 * - nothing else was asked to run in it at exec (no LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH;
 *   the environment read whole), and it has not been traced;
 * - it runs with its container's root: not chrooted, and its root on the executable's overlay
 *   (for a host path, not chrooted; for the parent, not chrooted: its root is not recorded).
 * A `parent-exe` entry holds the same way for the parent, which must also be the process that
 * forked the accessing one (not an adopter of an orphan), still running what it ran then.
 * Unknown, seeded (before the program loaded), truncated or unseen-fork processes never match.
 *
 * `accesses`: every access kind of the event is among the entry's kinds (an open+read is
 * allowed by `[read, open]`, not by `[read]`).
 */
import type { AllowMissReason } from "../../api/alert.ts";
import type { AccessKind } from "../../api/meta.ts";
import type { AllowEntry } from "../../api/policy.ts";
import type { ExecIdentity, ExecProvenance, FileKey, KernelEvent } from "../kernel/contract.ts";

/** What the matcher reads of an event. */
export type AllowSubject = Pick<KernelEvent, "accesses"> & { process?: KernelEvent["process"] };

/** The image's files at the exact paths the allow entries name, as found in the accessing container. */
export type AllowFiles = ReadonlyMap<string, readonly FileKey[]>;

/**
 * Where the trapped file is: in a container (an entry holds only for an image layer's file),
 * or on the host (standalone `hive watch` of a host path: the host's own files, on whatever
 * filesystem, are what ran there; everything else is checked the same).
 */
export interface AllowScope {
  files?: AllowFiles | undefined;
  host?: boolean | undefined;
}

/** Why one entry did not hold: the field and its first unmet condition. */
export interface AllowMiss {
  entry: number;
  field: "exe" | "parent-exe" | "accesses";
  reason: AllowMissReason;
}

/** One side (the process or its parent) as the matcher sees it. */
interface Runner {
  exe: ExecIdentity | undefined;
  provenance: ExecProvenance | undefined;
  chroot: boolean | undefined;
  /**
   * The device of the runner's root directory, which must be its executable's (the container's
   * overlay); `"unchecked"` for the parent, whose root the kernel does not record (its chroot it does).
   */
  rootDev: { major: number; minor: number } | undefined | "unchecked";
}

/** The exact paths a trap's allow entries name (a `*` pattern is matched on the kernel's path alone). */
export function exactAllowPaths(trap: { allow?: readonly AllowEntry[] | undefined }): string[] {
  const paths = (trap.allow ?? []).flatMap((e) => [e.exe ?? "", e["parent-exe"] ?? ""]);
  return [...new Set(paths.filter((p) => p.startsWith("/") && !p.includes("*")))];
}

/** True when the kernel-resolved `path` is the one `pattern` names (exact, or a `*`-ended prefix). */
export function pathMatches(pattern: string, path: string): boolean {
  // A pattern the schema refuses (relative, `*` inside) matches nothing rather than something.
  const star = pattern.indexOf("*");
  if (!pattern.startsWith("/") || (star !== -1 && star !== pattern.length - 1)) return false;
  return star === -1 ? path === pattern : path.startsWith(pattern.slice(0, -1));
}

/** The first condition of an executable entry `pattern` that `runner` does not meet; undefined when all hold. */
function exeMiss(pattern: string, runner: Runner, scope: AllowScope): AllowMissReason | undefined {
  const { exe, provenance: p } = runner;
  if (exe === undefined || exe.source === "unknown" || typeof exe.exe !== "string") return "unknown-process";
  if (exe.source === "seed") return "seeded";
  if (exe.truncated === true) return "path-truncated";
  if (!exe.exe.startsWith("/") || !pathMatches(pattern, exe.exe)) return "other-executable";
  if (p === undefined) return "not-from-image";
  if (p.layer === "container") return "written-in-container";
  if (p.layer === "unlinked") return "unlinked";
  if (p.layer !== "image" && !(scope.host === true && p.layer === "other")) return "not-from-image";
  if (!pattern.endsWith("*")) {
    const known = scope.files?.get(pattern);
    if (known === undefined || known.length === 0) return "not-resolved";
    if (!known.some((k) => sameFile(k, p.file))) return "not-the-image-file";
  }
  if (p.loaderEnv.length > 0) return "loader-env";
  if (p.envUnread) return "env-unread";
  if (p.traced) return "traced";
  if (runner.chroot !== false) return "chroot";
  // A host's root and its programs may sit on different mounts (/usr); a container's are one overlay.
  const root = runner.rootDev;
  if (scope.host !== true && root !== "unchecked") {
    if (root === undefined || root.major !== p.file.major || root.minor !== p.file.minor) return "other-root";
  }
  return undefined;
}

/** The same file (compared field by field: no id string per event). */
function sameFile(a: FileKey, b: FileKey): boolean {
  return a.ino === b.ino && a.major === b.major && a.minor === b.minor;
}

/** True when every kind of the event is among `allowed`. */
function accessesWithin(kinds: readonly AccessKind[], allowed: readonly AccessKind[]): boolean {
  return kinds.length > 0 && kinds.every((kind) => allowed.includes(kind));
}

/** Why `entry` does not hold for `event`; undefined when it does. An entry naming no executable never holds. */
export function entryMiss(
  entry: AllowEntry,
  event: AllowSubject,
  scope: AllowScope = {},
): Omit<AllowMiss, "entry"> | undefined {
  const exe = entry.exe;
  const parentExe = entry["parent-exe"];
  const process = event.process;
  if (exe === undefined && parentExe === undefined) return { field: "exe", reason: "other-executable" };
  if (exe !== undefined) {
    const reason = exeMiss(
      exe,
      {
        exe: process?.exe,
        provenance: process?.provenance,
        chroot: process?.chroot,
        rootDev: process?.rootDev,
      },
      scope,
    );
    if (reason) return { field: "exe", reason };
  }
  if (parentExe !== undefined) {
    const parent = process?.parent;
    const reason =
      exeMiss(
        parentExe,
        { exe: parent?.exe, provenance: parent?.provenance, chroot: parent?.chroot, rootDev: "unchecked" },
        scope,
      ) ??
      (process?.provenance === undefined || process.provenance.forkUnseen
        ? "fork-unseen"
        : parent?.reparented !== false
          ? "reparented"
          : parent.execedSinceFork !== false
            ? "parent-execed"
            : undefined);
    if (reason) return { field: "parent-exe", reason };
  }
  if (entry.accesses !== undefined && !accessesWithin(event.accesses, entry.accesses))
    return { field: "accesses", reason: "accesses" };
  return undefined;
}

/**
 * The first entry of `allow` that holds for `event` (the access is then counted, not
 * alerted), or why each entry did not (for the alert).
 */
export function allowDecision(
  allow: readonly AllowEntry[] | undefined,
  event: AllowSubject,
  scope: AllowScope = {},
): { entry: number } | { misses: AllowMiss[] } {
  const misses: AllowMiss[] = [];
  for (let i = 0; i < (allow?.length ?? 0); i++) {
    const miss = entryMiss(allow?.[i] as AllowEntry, event, scope);
    if (miss === undefined) return { entry: i };
    misses.push({ entry: i, field: miss.field, reason: miss.reason });
  }
  return { misses };
}

/**
 * Index of the first entry of `allow` that holds for `event`; undefined when none does (alert).
 * Once per event: it builds no list of misses (allowDecision does, for an alert).
 */
export function allowingEntry(
  allow: readonly AllowEntry[] | undefined,
  event: AllowSubject,
  scope: AllowScope = {},
): number | undefined {
  if (allow === undefined) return undefined;
  for (let i = 0; i < allow.length; i++)
    if (entryMiss(allow[i] as AllowEntry, event, scope) === undefined) return i;
  return undefined;
}

/** An entry as a short text, for logs and `hive status`: `exe=/usr/bin/passwd accesses=read,write`. */
export function describeEntry(entry: AllowEntry): string {
  const parts: string[] = [];
  if (entry.exe !== undefined) parts.push(`exe=${entry.exe}`);
  if (entry["parent-exe"] !== undefined) parts.push(`parent-exe=${entry["parent-exe"]}`);
  if (entry.accesses !== undefined) parts.push(`accesses=${entry.accesses.join(",")}`);
  return parts.join(" ");
}
