/**
 * Reads what an agent left pinned under the bpffs directory (for `hive status` and for
 * diagnosing a node): which link is attached, the watched entries and the counters. Only
 * reads; adopting the state is the loader's job.
 */

import { closeSync, existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pinnedLinkMode } from "./attach.ts";
import { DEFAULT_PIN_ROOT } from "./bpffs.ts";
import type { AttachMode, FileKey } from "./contract.ts";
import { readCounters } from "./counters.ts";
import { DENY_LINK_PIN } from "./deny-link.ts";
import type { DenyMechanism } from "./deny-mechanism.ts";
import { type DecodedValue, decodeKey, decodeValue, KEY_LAYOUT, VALUE_LAYOUT } from "./layout.ts";
import { check, forEachMapEntry, libbpf } from "./libbpf-ffi.ts";

export interface PinnedState {
  pinRoot: string;
  /** Attach mode of a pinned link, or null when no link is pinned (nothing attached, or a legacy kprobe). */
  attachMode: AttachMode | null;
  /** The deny program's link is pinned: the kernel refuses what denying entries name. */
  denyAttached: boolean;
  /** How the pinned deny link denies, as its attach type says (undefined: not said, or no link). */
  denyMechanism?: DenyMechanism | undefined;
  maps: string[];
  watched: Array<{ key: FileKey } & DecodedValue>;
  counters: {
    events: bigint;
    lost: bigint;
    checks: bigint;
    bursts: bigint;
    unfolded: bigint;
    /** Checks of an image layer's file skipped for a quieted cgroup (quiet-map.ts). */
    quiet: bigint;
    /** Accesses refused for a denying trap. */
    denied: bigint;
    /** Checks an allow entry let through in the kernel. */
    allowed: bigint;
  } | null;
}

/** null when nothing is pinned. */
export function readPinnedState(pinRoot = DEFAULT_PIN_ROOT): PinnedState | null {
  if (!existsSync(pinRoot)) return null;
  const names = readdirSync(pinRoot);
  const lib = libbpf();
  const attachMode = pinnedLinkMode(names);
  const watched: PinnedState["watched"] = [];
  if (names.includes("hive_watch")) {
    const fd = check(lib.bpf_obj_get(join(pinRoot, "hive_watch")) as number, "opening the pinned watch map", {
      object: join(pinRoot, "hive_watch"),
    });
    forEachMapEntry(fd, KEY_LAYOUT.size, VALUE_LAYOUT.size, (key, value) => {
      watched.push({ key: decodeKey(key), ...decodeValue(value) });
    });
    closeSync(fd); // node:fs closes any descriptor of this process, BPF objects included
  }
  let counters: PinnedState["counters"] = null;
  if (names.includes("hive_counters")) {
    const fd = check(
      lib.bpf_obj_get(join(pinRoot, "hive_counters")) as number,
      "opening the pinned counters",
      {
        object: join(pinRoot, "hive_counters"),
      },
    );
    counters = readCounters(fd, lib.libbpf_num_possible_cpus() as number);
    closeSync(fd); // node:fs closes any descriptor of this process, BPF objects included
  }
  return {
    pinRoot,
    attachMode,
    denyAttached: names.includes(DENY_LINK_PIN),
    denyMechanism: names.includes(DENY_LINK_PIN) ? linkMechanism(join(pinRoot, DENY_LINK_PIN)) : undefined,
    maps: names.filter((n) => n.startsWith("hive_")),
    watched,
    counters,
  };
}

/** BPF_MODIFY_RETURN and BPF_LSM_MAC (include/uapi/linux/bpf.h enum bpf_attach_type). */
const ATTACH_TYPES: Record<number, DenyMechanism> = { 26: "fmod_ret", 27: "bpf-lsm" };

/** The deny mechanism of a pinned tracing link, from its fdinfo's attach_type (kernels that print it). */
function linkMechanism(path: string): DenyMechanism | undefined {
  const fd = libbpf().bpf_obj_get(path) as number;
  if (fd < 0) return undefined;
  try {
    const type = /^attach_type:\s*(\d+)/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"))?.[1];
    return type === undefined ? undefined : ATTACH_TYPES[Number(type)];
  } finally {
    closeSync(fd);
  }
}
