/**
 * The kernel map holds only slot numbers; what each slot means (which policy, trap, path,
 * container) lives in user space. Whoever syncs the map writes this small JSON file beside
 * it, so that `hive status` — another process, possibly while the agent runs — can name the
 * traps of the watched files it reads from the pinned map. Written atomically (rename).
 */

import { rm } from "node:fs/promises";
import { basename } from "node:path";
import { HiveError } from "../../api/errors.ts";
import type { AttachMode } from "../kernel/contract.ts";
import { readFileIfPresent, writePrivateJsonFile } from "../private-file.ts";
import { displaySafe } from "../text.ts";
import type { ContainerFollowState } from "./container-events.ts";
import { containerLabel, trapAccesses, type UnresolvedTrap, type WatchTable } from "./watch-plan.ts";

const UNARMED_MESSAGE_MAX = 512;

/** Directory of the tables: tmpfs, gone at reboot together with the kernel state they describe. */
export const WATCH_TABLE_DIR = "/run/hive";

/** bpffs directory `hive watch` pins its maps under, apart from an agent's (/sys/fs/bpf/hive). */
export const STANDALONE_PIN_ROOT = "/sys/fs/bpf/hive-standalone";

/** The table describing the maps pinned under `pinRoot`: /run/hive/<basename>.watch-table.json. */
export function watchTableFileFor(pinRoot: string, dir = WATCH_TABLE_DIR): string {
  return `${dir}/${basename(pinRoot)}.watch-table.json`;
}

export interface WatchTableTrap {
  policy: string;
  namespace?: string;
  trapId: string;
  path: string;
  /** "host", or the container as `name (id)`. */
  target: string;
  accesses: string[];
}

export interface WatchTableRecord {
  slot: number;
  kind: "file" | "parent";
  device: string;
  inode: string;
  traps: WatchTableTrap[];
}

/** A trap the writer could not arm, and why (a proof the kernel did not give, a missing file…). */
export interface WatchTableMiss {
  trap: WatchTableTrap;
  code: string;
  message: string;
}

export interface WatchTableFile {
  /** Who wrote it: "standalone" (`hive watch`) or "agent". */
  writer: "standalone" | "agent";
  pid: number;
  startedAt: string;
  updatedAt: string;
  attachMode: AttachMode;
  /** Why that attach mode was used (KernelWatcher.attachReason). */
  attachReason?: string;
  kernelId: string;
  slots: WatchTableRecord[];
  /** Traps not armed at all (absent in tables of older writers). */
  unarmed?: WatchTableMiss[];
  /** How `hive watch` follows container starts and stops (absent without a container runtime). */
  containers?: ContainerFollowState;
}

function tableTrap(f: Pick<UnresolvedTrap, "ref" | "target">): WatchTableTrap {
  const trap: WatchTableTrap = {
    policy: f.ref.policy.metadata.name ?? "",
    trapId: f.ref.trapId,
    path: f.ref.trap.path,
    target: f.target.kind === "host" ? "host" : containerLabel(f.target.container),
    accesses: [...trapAccesses(f.ref.trap)],
  };
  if (f.ref.policy.metadata.namespace !== undefined) trap.namespace = f.ref.policy.metadata.namespace;
  return trap;
}

export function tableRecords(table: WatchTable): WatchTableRecord[] {
  return [...table.slots].map(([slot, info]) => ({
    slot,
    // An image layer's file is a file entry to the kernel; its traps say "image layer".
    kind: info.kind === "parent" ? "parent" : "file",
    device: `${info.key.major}:${info.key.minor}`,
    inode: info.key.ino.toString(),
    traps: [
      ...[...info.files, ...info.waiting].map(tableTrap),
      ...info.refs.map((ref) => ({ ...tableTrap({ ref, target: { kind: "host" } }), target: "image layer" })),
    ],
  }));
}

/** The plan's traps that are not armed, with their error (a file waited for in a watched directory included). */
export function unarmedRecords(unresolved: readonly UnresolvedTrap[]): WatchTableMiss[] {
  return unresolved.map((miss) => ({
    trap: tableTrap(miss),
    code: miss.error.code,
    // Paths and symlink names of a container's choosing: escaped and bounded.
    message: displaySafe(miss.error.describe(), UNARMED_MESSAGE_MAX),
  }));
}

export async function writeWatchTableFile(file: string, content: WatchTableFile): Promise<void> {
  try {
    await writePrivateJsonFile(file, content);
  } catch (cause) {
    throw new HiveError("InputUnreadable", "cannot write the watch table", {
      object: file,
      hint: "run as root (the agent can also be given a writable directory with --table-dir)",
      cause,
    });
  }
}

export async function readWatchTableFile(file: string): Promise<WatchTableFile | undefined> {
  const text = await readFileIfPresent(file, "watch table");
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as WatchTableFile;
  } catch (cause) {
    throw new HiveError("InputUnreadable", "the watch table is not valid JSON", {
      object: file,
      hint: "it is rewritten by the next `hive watch` or agent; delete it if none runs",
      cause,
    });
  }
}

export async function removeWatchTableFile(file: string): Promise<void> {
  await rm(file, { force: true });
}

/**
 * The pid of a live process other than this one that keeps `file` (a second writer would
 * share, and overwrite, its kernel map); undefined when there is none or it is gone.
 */
export async function liveWriterOf(file: string): Promise<number | undefined> {
  const table = await readWatchTableFile(file).catch(() => undefined);
  if (table === undefined || table.pid === process.pid) return undefined;
  try {
    process.kill(table.pid, 0);
    return table.pid;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else; it is alive all the same.
    return (error as NodeJS.ErrnoException).code === "EPERM" ? table.pid : undefined;
  }
}
