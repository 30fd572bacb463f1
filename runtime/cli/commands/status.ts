/**
 * `hive status` — what the local kernel has loaded, read from the pinned maps (so it works
 * beside a running agent or `hive watch`, and after one died leaving its state pinned),
 * joined with the watch table its writer keeps, which names the trap behind each slot, and
 * with the counts of accesses the traps' allow lists let through (written beside the table).
 */

import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { dirname, join } from "node:path";
import { HiveError } from "../../../api/errors.ts";
import { type AllowedFile, allowedFileFor, readAllowedFile } from "../../alerts/allowed-counts.ts";
import type { AttachMode } from "../../kernel/contract.ts";
import { describeMechanism } from "../../kernel/deny-mechanism.ts";
import { DEFAULT_PIN_ROOT, type PinnedState, readPinnedState } from "../../kernel/index.ts";
import { ACTIONS, accessesFromMask } from "../../kernel/layout.ts";
import { linkPinName } from "../../kernel/loader.ts";
import type { ContainerFollowState } from "../../standalone/container-events.ts";
import {
  readWatchTableFile,
  STANDALONE_PIN_ROOT,
  type WatchTableFile,
  type WatchTableMiss,
  type WatchTableRecord,
  watchTableFileFor,
} from "../../standalone/watch-table-file.ts";
import { displaySafe } from "../../text.ts";
import { type Command, parseCommandArgs } from "../command.ts";
import { EXIT } from "../exit-codes.ts";

const help = `Usage: hive status [--pin-root DIR] [--json]

Shows what Hive has loaded into this machine's kernel: the program and how it is attached,
the watched files with the traps they belong to, the kernel counters (events, losses), and
the accesses each trap's allow list let through (counted, not alerted), by entry.
Reads the pinned BPF maps, so it works while an agent or \`hive watch\` runs (needs root).
What the traps found across the cluster is in each namespace's PolicyReport:
\`kubectl get policyreport -A\` (report hive-file-access).

Options:
  --pin-root DIR  bpffs directory to read (default: both ${DEFAULT_PIN_ROOT}, the agent's,
                  and ${STANDALONE_PIN_ROOT}, hive watch's)
  --table-dir DIR directory of the watch tables that name each slot's traps, and of the
                  allowed-access counts (default /run/hive)
  --json          print the state as one JSON document instead of text

Exit codes: 0 something is loaded · 2 usage · 3 the maps cannot be read (not root, no libbpf) ·
4 nothing is loaded.`;

interface RootStatus {
  pinRoot: string;
  state: PinnedState;
  table: WatchTableFile | undefined;
  program: ProgramInfo | undefined;
  allowed: AllowedFile | undefined;
}

/** The attached program as the kernel describes it (bpftool, when installed). */
interface ProgramInfo {
  id: number;
  name: string;
  /** The running program's version: a hash of its instructions (the agent logs and exports it). */
  tag?: string;
  /** Runs the kernel skipped (recursion; kprobes since 6.7). */
  misses?: number;
  loadedAt?: number;
  runCount?: number;
  runTimeNs?: number;
}

/**
 * Asks bpftool which program the pinned link runs. Optional enrichment: without bpftool (or
 * without a pinned link) status still shows everything the pinned maps hold.
 */
function programInfo(pinRoot: string, mode: AttachMode | null | undefined): ProgramInfo | undefined {
  if (!mode) return undefined;
  const bpftool = (args: string[]): unknown => {
    const run = spawnSync("bpftool", ["-j", ...args], { encoding: "utf8", timeout: 5000 });
    return run.status === 0 ? JSON.parse(run.stdout) : undefined;
  };
  try {
    const link = bpftool(["link", "show", "pinned", join(pinRoot, linkPinName(mode))]) as
      | { prog_id?: number }
      | undefined;
    if (link?.prog_id === undefined) return undefined;
    const prog = bpftool(["prog", "show", "id", String(link.prog_id)]) as
      | {
          id: number;
          name: string;
          tag?: string;
          recursion_misses?: number;
          loaded_at?: number;
          run_cnt?: number;
          run_time_ns?: number;
        }
      | undefined;
    if (prog === undefined) return undefined;
    const info: ProgramInfo = { id: prog.id, name: prog.name };
    if (prog.tag !== undefined) info.tag = prog.tag;
    if (prog.recursion_misses !== undefined) info.misses = prog.recursion_misses;
    if (prog.loaded_at !== undefined) info.loadedAt = prog.loaded_at;
    if (prog.run_cnt !== undefined) info.runCount = prog.run_cnt;
    if (prog.run_time_ns !== undefined) info.runTimeNs = prog.run_time_ns;
    return info;
  } catch {
    return undefined; // bpftool's output is a convenience, never a reason to fail status
  }
}

/**
 * The writer's slots the kernel map does not hold: entries a full map had no room for (the
 * writer syncs every entry it wants; the map keeps what fits).
 */
export function notWatched(root: Pick<RootStatus, "state" | "table">): WatchTableRecord[] {
  const inKernel = new Set(
    root.state.watched.map((w) => `${w.kind}:${w.key.major}:${w.key.minor}:${w.key.ino}`),
  );
  return (root.table?.slots ?? []).filter((r) => !inKernel.has(`${r.kind}:${r.device}:${r.inode}`));
}

function trapLabel(record: Pick<WatchTableRecord, "kind" | "traps"> | undefined): string {
  if (record === undefined) return "(no watch table: the writer did not name this slot)";
  return record.traps
    .map((t) =>
      record.kind === "parent"
        ? `directory of ${t.path} (${t.target})`
        : `${t.namespace ? `${t.namespace}/` : ""}${t.policy} ${t.path} (${t.target})`,
    )
    .join("; ");
}

function render(root: RootStatus): string {
  const { state, table } = root;
  const mode = state.attachMode ?? table?.attachMode;
  const lines: string[] = [];
  const writer = table ? ` — ${table.writer === "standalone" ? "hive watch" : "agent"} pid ${table.pid}` : "";
  lines.push(`${root.pinRoot}${writer}`);
  const how = mode ? `attached by ${mode} to inode_permission` : "attach mode unknown (no pinned link)";
  const prog = root.program;
  lines.push(`  program   ${prog ? `${prog.name} (id ${prog.id}), ` : ""}${how}`);
  if (prog?.tag)
    lines.push(`  version   ${prog.tag}${prog.misses ? ` · ${prog.misses} runs skipped by the kernel` : ""}`);
  if (table?.attachReason) lines.push(`  why       ${table.attachReason}`);
  if (prog?.loadedAt !== undefined) lines.push(`  loaded    ${new Date(prog.loadedAt * 1000).toISOString()}`);
  if (table?.containers) lines.push(renderFollowing(table.containers));
  if (prog?.runCount) {
    // run_time_ns/run_cnt are only counted while kernel.bpf_stats_enabled=1.
    lines.push(
      `  runs      ${prog.runCount} · average ${Math.round((prog.runTimeNs ?? 0) / prog.runCount)} ns`,
    );
  }
  lines.push(`  maps      ${state.maps.join(", ") || "(none)"}`);
  if (state.counters) {
    const c = state.counters;
    lines.push(
      `  counters  events ${c.events} · lost ${c.lost} · checks ${c.checks} · bursts ${c.bursts} · quiet ${c.quiet} · allowed ${c.allowed}`,
    );
  } else {
    lines.push("  counters  (not pinned)");
  }
  const deny = denySummary(state);
  if (deny) lines.push(`  deny      ${deny}`);
  const files = state.watched.filter((w) => w.kind === "file").length;
  const dirs = state.watched.length - files;
  lines.push(
    `  watched   ${files} file${files === 1 ? "" : "s"}, ${dirs} director${dirs === 1 ? "y" : "ies"} (for replaced files)`,
  );
  const bySlot = new Map((table?.slots ?? []).map((r) => [r.slot, r]));
  const rows = [...state.watched]
    .sort((a, b) => a.slot - b.slot)
    .map((w) => [
      String(w.slot),
      w.kind,
      `${w.key.major}:${w.key.minor}`,
      w.key.ino.toString(),
      w.kind === "parent" ? "entries" : accessesFromMask(w.mask).join(",") || "-",
      trapLabel(bySlot.get(w.slot)),
    ]);
  if (rows.length > 0) {
    const header = ["SLOT", "KIND", "DEVICE", "INODE", "ACCESSES", "TRAPS"];
    const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
    const fmt = (r: string[]) =>
      `    ${r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join("  ")}`;
    lines.push(fmt(header), ...rows.map(fmt));
  }
  const missing = notWatched(root);
  if (missing.length > 0) {
    lines.push(
      `  NOT WATCHED ${missing.length} (the kernel watch map is full; they are armed as soon as room is made)`,
    );
    for (const r of missing) lines.push(`    ${r.kind} ${r.device} ${r.inode}  ${trapLabel(r)}`);
  }
  lines.push(...renderUnarmed(table?.unarmed ?? []));
  lines.push(...renderAllowed(root.allowed));
  return lines.join("\n");
}

/** How `hive watch` learns of container starts and stops, and whether that works right now. */
export function renderFollowing(state: ContainerFollowState): string {
  if (state.mode === "polling") {
    return `  containers re-listed every ${(state.pollIntervalMs ?? 0) / 1000} s (the runtime has no event service)`;
  }
  if (!state.connected) {
    const why = state.lastError ? ` (${displaySafe(state.lastError, 200)})` : "";
    return `  containers event stream DISCONNECTED since ${state.since}${why}: resubscribing`;
  }
  const again = state.resubscribes > 0 ? ` · resubscribed ${state.resubscribes} times` : "";
  return `  containers followed on containerd's event stream, connected since ${state.since}${again}`;
}

/** Traps the writer could not arm (the watch table's `unarmed`), one row each with the reason. */
export function renderUnarmed(unarmed: readonly WatchTableMiss[]): string[] {
  if (unarmed.length === 0) return [];
  return [
    `  NOT WATCHED ${unarmed.length} trap${unarmed.length === 1 ? "" : "s"} could not be armed`,
    // The message says the code; the trap's path may hold anything its policy's author wrote.
    ...unarmed.map((m) => `    ${displaySafe(trapLabel({ kind: "file", traps: [m.trap] }))}  ${m.message}`),
  ];
}

/** The allowed-access counts, one row per trap × allow entry. */
export function renderAllowed(allowed: AllowedFile | undefined): string[] {
  if (allowed === undefined || allowed.records.length === 0)
    return ["  allowed   (no access allowed by an allow list)"];
  const total = allowed.records.reduce((sum, r) => sum + r.count, 0);
  const lines = [
    `  allowed   ${total} access${total === 1 ? "" : "es"} counted, not alerted, since ${allowed.startedAt} (pid ${allowed.pid})`,
  ];
  const rows = allowed.records.map((r) => [
    String(r.count),
    `${r.namespace ? `${r.namespace}/` : ""}${r.policy} ${r.path}`,
    r.trapId.slice(0, 12),
    `#${r.entry} ${r.allow}`,
  ]);
  const header = ["COUNT", "TRAP", "TRAP-ID", "ENTRY"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const fmt = (r: string[]) =>
    `    ${r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join("  ")}`;
  lines.push(fmt(header), ...rows.map(fmt));
  return lines;
}

/** What the kernel refuses: the deny link, the denying entries, the refusals counted; "" when none. */
export function denySummary(state: RootStatus["state"]): string {
  const denying = state.watched.filter((w) => w.action === ACTIONS.deny).length;
  const dryRun = state.watched.filter((w) => w.action === ACTIONS.dryRun).length;
  if (!state.denyAttached && denying + dryRun === 0) return "";
  const how = state.denyMechanism ? `, ${describeMechanism(state.denyMechanism)}` : "";
  const link = state.denyAttached
    ? `attached (link_deny${how})`
    : "NOT ATTACHED: denying entries are only alerted";
  const refused = state.counters ? ` · refused ${state.counters.denied}` : "";
  return `${link} · ${denying} file${denying === 1 ? "" : "s"} denied, ${dryRun} dry run${refused}`;
}

function toJson(root: RootStatus): unknown {
  const bySlot = new Map((root.table?.slots ?? []).map((r) => [r.slot, r]));
  return {
    pinRoot: root.pinRoot,
    writer: root.table
      ? { kind: root.table.writer, pid: root.table.pid, updatedAt: root.table.updatedAt }
      : null,
    attachMode: root.state.attachMode ?? root.table?.attachMode ?? null,
    attachReason: root.table?.attachReason ?? null,
    denyAttached: root.state.denyAttached,
    denyMechanism: root.state.denyMechanism ?? null,
    program: root.program ?? null,
    maps: root.state.maps,
    counters: root.state.counters
      ? Object.fromEntries(Object.entries(root.state.counters).map(([k, v]) => [k, Number(v)]))
      : null,
    watched: root.state.watched.map((w) => ({
      slot: w.slot,
      kind: w.kind,
      device: `${w.key.major}:${w.key.minor}`,
      inode: w.key.ino.toString(),
      accesses: w.kind === "parent" ? [] : accessesFromMask(w.mask),
      ...(w.action === ACTIONS.deny
        ? { deny: "deny" }
        : w.action === ACTIONS.dryRun
          ? { deny: "dryRun" }
          : {}),
      traps: bySlot.get(w.slot)?.traps ?? [],
    })),
    notWatched: notWatched(root).map((r) => ({
      kind: r.kind,
      device: r.device,
      inode: r.inode,
      traps: r.traps,
    })),
    unarmed: root.table?.unarmed ?? [],
    containers: root.table?.containers ?? null,
    allowed: root.allowed
      ? {
          pid: root.allowed.pid,
          startedAt: root.allowed.startedAt,
          updatedAt: root.allowed.updatedAt,
          records: root.allowed.records,
        }
      : null,
  };
}

export const statusCommand: Command = {
  help,
  async run(args) {
    const { values } = parseCommandArgs(
      args,
      { "pin-root": { type: "string" }, "table-dir": { type: "string" }, json: { type: "boolean" } },
      false,
    );
    const roots = values["pin-root"] ? [values["pin-root"]] : [DEFAULT_PIN_ROOT, STANDALONE_PIN_ROOT];
    const found: RootStatus[] = [];
    for (const pinRoot of roots) {
      try {
        accessSync(dirname(pinRoot), constants.R_OK | constants.X_OK);
      } catch (cause) {
        if ((cause as NodeJS.ErrnoException).code === "ENOENT") continue;
        throw new HiveError("PermissionDenied", "cannot read the BPF filesystem", {
          object: dirname(pinRoot),
          hint: "run `hive status` as root (sudo), like the agent and `hive watch`",
          cause,
        });
      }
      const state = readPinnedState(pinRoot);
      if (state === null) continue;
      const table = await readWatchTableFile(watchTableFileFor(pinRoot, values["table-dir"]));
      const program = programInfo(pinRoot, state.attachMode);
      const allowed = await readAllowedFile(allowedFileFor(pinRoot, values["table-dir"]));
      found.push({ pinRoot, state, table, program, allowed });
    }
    if (found.length === 0) {
      throw new HiveError("NotLoaded", "no Hive program is loaded on this kernel", {
        object: roots.join(", "),
        hint: "nothing is pinned there; start `hive watch --policy FILE` or the agent (and run status as root)",
      });
    }
    if (values.json) {
      process.stdout.write(`${JSON.stringify(found.map(toJson), null, 2)}\n`);
    } else {
      process.stdout.write(`${found.map(render).join("\n\n")}\n`);
    }
    return EXIT.ok;
  },
};
