/**
 * Opening, configuring and loading bpf/hive.bpf.o: which programs load for the chosen attach
 * mode, how large the maps are, where they are pinned, and the libbpf load itself. The
 * watcher (loader.ts) calls these in order; each step is one group of libbpf calls.
 */

import { existsSync, readdirSync, rmdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { HiveError } from "../../api/errors.ts";
import { ATTACH_PROGRAMS, CHANGE_HOOKS, type KernelFacts } from "./attach.ts";
import { ensureBpffsDir } from "./bpffs.ts";
import { ATTACH_MODES, type AttachMode } from "./contract.ts";
import { DENY_PROGRAMS, type DenyMechanism } from "./deny-mechanism.ts";
import { check, checkPointer, type Libbpf, type Pointer } from "./libbpf-ffi.ts";
import { clearLibbpfLog, loadError } from "./load-errors.ts";
import type { KernelWatcherOptions } from "./watcher-options.ts";

/** The maps a restarted agent adopts: pinned under the pin root by these names. */
export const PINNED_MAPS = [
  "hive_watch",
  "hive_bitmap",
  "hive_bursts",
  "hive_events",
  "hive_counters",
  "hive_procs",
  "hive_swept",
  "hive_provers",
  "hive_proofs",
  "hive_proving",
  "hive_flood",
  "hive_followed",
  "hive_quiet",
  "hive_allow",
] as const;
export type PinnedMap = (typeof PINNED_MAPS)[number];

/** Throws BpfObjectMissing, with the build hint, when the compiled object is not there. */
export function requireObjectFile(objectPath: string): void {
  if (!existsSync(objectPath)) {
    throw new HiveError("BpfObjectMissing", "the compiled BPF program is missing", {
      object: objectPath,
      hint: "build it with `sh bpf/build.sh` (needs clang)",
    });
  }
}

export function openObject(lib: Libbpf, objectPath: string): Pointer {
  return checkPointer(
    lib.bpf_object__open_file(objectPath, null) as Pointer | null,
    "opening the BPF object",
    {
      object: objectPath,
      code: "BpfObjectMissing",
    },
  );
}

export function findProgram(lib: Libbpf, obj: Pointer, name: string): Pointer {
  return checkPointer(lib.bpf_object__find_program_by_name(obj, name) as Pointer | null, "finding program", {
    object: name,
    code: "BpfObjectMissing",
  });
}

function setAutoload(lib: Libbpf, obj: Pointer, name: string, load: boolean): void {
  check(
    lib.bpf_program__set_autoload(findProgram(lib, obj, name), load) as number,
    "bpf_program__set_autoload",
    {
      object: name,
    },
  );
}

/** Which programs to load: the chosen mode's trap and change hooks, its parent hook if wanted, the deny program of one mechanism if usable. */
export interface ProgramSelection {
  mode: AttachMode;
  parentHook: boolean;
  deny: DenyMechanism | undefined;
}

/** Marks every program of the object to load or not (each mode's programs exist in the object). */
export function selectPrograms(lib: Libbpf, obj: Pointer, selection: ProgramSelection): void {
  for (const mode of ATTACH_MODES) {
    const { trap, parent } = ATTACH_PROGRAMS[mode];
    setAutoload(lib, obj, trap, mode === selection.mode);
    setAutoload(lib, obj, parent, mode === selection.mode && selection.parentHook);
    for (const hook of CHANGE_HOOKS) setAutoload(lib, obj, hook.programs[mode], mode === selection.mode);
  }
  for (const [mechanism, program] of Object.entries(DENY_PROGRAMS))
    setAutoload(lib, obj, program, mechanism === selection.deny);
}

export function findMaps(lib: Libbpf, obj: Pointer): Record<PinnedMap, Pointer> {
  const maps = {} as Record<PinnedMap, Pointer>;
  for (const name of PINNED_MAPS) {
    maps[name] = checkPointer(lib.bpf_object__find_map_by_name(obj, name) as Pointer | null, "finding map", {
      object: name,
    });
  }
  return maps;
}

/** Overrides max_entries where an option asks to (undefined keeps the object's). */
export function sizeMaps(
  lib: Libbpf,
  maps: Record<PinnedMap, Pointer>,
  capacities: Pick<KernelWatcherOptions, "watchCapacity" | "burstCapacity" | "ringBytes">,
): void {
  const sizes: Array<[Pointer, number | undefined, string]> = [
    [maps.hive_watch, capacities.watchCapacity, "hive_watch"],
    [maps.hive_bursts, capacities.burstCapacity, "hive_bursts"],
    [maps.hive_events, capacities.ringBytes, "hive_events"],
  ];
  for (const [map, entries, name] of sizes) {
    if (entries === undefined) continue;
    check(lib.bpf_map__set_max_entries(map, entries) as number, "sizing a map", { object: name });
  }
}

/** Pin paths set before loading: libbpf then reuses a map already pinned there, or pins the new one. */
export function pinMaps(lib: Libbpf, maps: Record<PinnedMap, Pointer>, pinRoot: string): void {
  ensureBpffsDir(pinRoot);
  for (const name of PINNED_MAPS) {
    check(lib.bpf_map__set_pin_path(maps[name], join(pinRoot, name)) as number, "bpf_map__set_pin_path", {
      object: name,
    });
  }
}

/**
 * Removes what `pinMaps` and the loader pinned under `pinRoot` (the maps, the program), and the
 * directory once empty: an agent that stops for good leaves nothing for a next one to adopt.
 */
export function unpinAll(
  lib: Libbpf,
  maps: Record<PinnedMap, Pointer>,
  pinRoot: string,
  programPin: string,
): void {
  for (const name of PINNED_MAPS) lib.bpf_map__unpin(maps[name], null);
  rmSync(join(pinRoot, programPin), { force: true });
}

/** Removes `pinRoot` when nothing is pinned in it any more. */
export function removeEmptyPinRoot(pinRoot: string): void {
  if (existsSync(pinRoot) && readdirSync(pinRoot).length === 0) rmdirSync(pinRoot);
}

/** Loads the object; a failure is explained from libbpf's log (load-errors.ts). */
export function loadObject(
  lib: Libbpf,
  obj: Pointer,
  objectPath: string,
  mode: AttachMode,
  facts: KernelFacts,
): void {
  clearLibbpfLog();
  const loaded = lib.bpf_object__load(obj) as number;
  if (loaded < 0) throw loadError(-loaded, objectPath, mode, facts);
}

export function mapFds(lib: Libbpf, maps: Record<PinnedMap, Pointer>): Record<PinnedMap, number> {
  const fds = {} as Record<PinnedMap, number>;
  for (const name of PINNED_MAPS)
    fds[name] = check(lib.bpf_map__fd(maps[name]) as number, "bpf_map__fd", { object: name });
  return fds;
}
