/**
 * `hive status` — what the local kernel has loaded, read from the pinned maps (so it works
 * beside a running agent or `hive watch`, and after one died leaving its state pinned),
 * joined with the watch table its writer keeps, which names the trap behind each slot.
 */
import { accessSync, constants } from "node:fs";
import { dirname } from "node:path";
import { HiveError } from "../../errors.ts";
import { DEFAULT_PIN_ROOT, type PinnedState, readPinnedState } from "../../kernel/index.ts";
import { accessesFromMask } from "../../kernel/layout.ts";
import {
  readWatchTableFile,
  STANDALONE_PIN_ROOT,
  type WatchTableFile,
  type WatchTableRecord,
  watchTableFileFor,
} from "../../standalone/watch-table-file.ts";
import { type Command, parseCommandArgs } from "../command.ts";
import { EXIT } from "../exit-codes.ts";

const help = `Usage: hive status [--pin-root DIR] [--json]

Shows what Hive has loaded into this machine's kernel: the program and how it is attached,
the watched files with the traps they belong to, and the kernel counters (events, losses).
Reads the pinned BPF maps, so it works while an agent or \`hive watch\` runs (needs root).

Options:
  --pin-root DIR  bpffs directory to read (default: both ${DEFAULT_PIN_ROOT}, the agent's,
                  and ${STANDALONE_PIN_ROOT}, hive watch's)
  --table-dir DIR directory of the watch tables that name each slot's traps (default /run/hive)
  --json          print the state as one JSON document instead of text

Exit codes: 0 something is loaded · 2 usage · 3 the maps cannot be read (not root, no libbpf) ·
4 nothing is loaded.`;

interface RootStatus {
  pinRoot: string;
  state: PinnedState;
  table: WatchTableFile | undefined;
}

function trapLabel(record: WatchTableRecord | undefined): string {
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
  lines.push(
    `  program   inode_permission trap, ${mode ? `attached by ${mode}` : "attach mode unknown (no pinned link)"}`,
  );
  lines.push(`  maps      ${state.maps.join(", ") || "(none)"}`);
  if (state.counters) {
    const c = state.counters;
    lines.push(`  counters  events ${c.events} · lost ${c.lost} · checks ${c.checks} · bursts ${c.bursts}`);
  } else {
    lines.push("  counters  (not pinned)");
  }
  const files = state.watched.filter((w) => w.kind === "file").length;
  lines.push(`  watched   ${files} file(s), ${state.watched.length - files} directorie(s)`);
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
  return lines.join("\n");
}

function toJson(root: RootStatus): unknown {
  const bySlot = new Map((root.table?.slots ?? []).map((r) => [r.slot, r]));
  return {
    pinRoot: root.pinRoot,
    writer: root.table
      ? { kind: root.table.writer, pid: root.table.pid, updatedAt: root.table.updatedAt }
      : null,
    attachMode: root.state.attachMode ?? root.table?.attachMode ?? null,
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
      traps: bySlot.get(w.slot)?.traps ?? [],
    })),
  };
}

export const statusCommand: Command = {
  name: "status",
  summary: "what the local kernel has loaded: program, attach mode, watched files, counters",
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
      found.push({ pinRoot, state, table });
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
