/**
 * Trap proofs: before a trap is armed, the thread that resolved it checks the file once with
 * access(2) through the O_PATH descriptor it holds (opens nothing, reads nothing) and the kernel
 * program records which identities that check went through (bpf/prove.bpf.h hive_prove). stat()
 * does not always name the inode the kernel checks: an overlay reports a layer's inode under a
 * pseudo device that no check ever carries, and a trap armed on it would never fire. The proof
 * arms the identity the kernel really checks, and a file no check reaches is refused instead of
 * being watched in vain.
 *
 * Runs in whichever thread resolves (the resolver's worker threads, or `hive watch`'s main
 * thread): the maps are addressed by descriptor, which every thread of the process shares.
 */
import { accessSync, closeSync, constants, existsSync, readlinkSync, statSync } from "node:fs";
import { join } from "node:path";
import { HiveError } from "../../api/errors.ts";
import type { FileKey } from "./contract.ts";
import { decodeProof, fileKeyId, PROOF_LAYOUT } from "./layout.ts";
import { check, forEachMapEntry, libbpf } from "./libbpf-ffi.ts";
import { addProvers } from "./prover-gate.ts";

/** Descriptors of hive_provers, hive_proofs and the provers' gate (pinned beside the watch map). */
export interface ProofMaps {
  provers: number;
  proofs: number;
  /** hive_proving (prover-gate.ts); absent in the pins of a program that asks every check. */
  proving?: number;
}

/** What a proof says about one file: the identities the kernel checked, in order. */
export interface TrapProof {
  ids: FileKey[];
}

const PROVERS = "hive_provers";
const PROOFS = "hive_proofs";
const PROVING = "hive_proving";

/**
 * Opens the proof maps an agent pinned under `pinRoot`, or null when none are pinned (no
 * program loaded on this kernel yet). Stale registrations of exited Hive processes are dropped,
 * so that their thread ids, once reused, are not taken for provers.
 */
export function openPinnedProofMaps(pinRoot: string): ProofMaps | null {
  if (!existsSync(join(pinRoot, PROVERS)) || !existsSync(join(pinRoot, PROOFS))) return null;
  const lib = libbpf();
  const open = (name: string) =>
    check(lib.bpf_obj_get(join(pinRoot, name)) as number, "opening a pinned proof map", {
      object: join(pinRoot, name),
    });
  const provers = open(PROVERS);
  let proofs: number;
  try {
    proofs = open(PROOFS);
  } catch (error) {
    closeSync(provers);
    throw error;
  }
  const proving = existsSync(join(pinRoot, PROVING)) ? open(PROVING) : undefined;
  const stale: Buffer[] = [];
  forEachMapEntry(provers, 4, 4, (key, value) => {
    if (!existsSync(`/proc/${value.readUInt32LE(0)}`)) stale.push(Buffer.from(key));
  });
  // A prover that died registered was counted in the gate too: taken away with its entry.
  let removed = 0;
  for (const key of stale) if ((lib.bpf_map_delete_elem(provers, key) as number) === 0) removed++;
  if (proving !== undefined && removed > 0) addProvers(proving, -removed);
  return { provers, proofs, ...(proving !== undefined ? { proving } : {}) };
}

/** The calling thread's id (Node has no gettid; /proc/thread-self names it). */
function threadId(): number {
  return Number(readlinkSync("/proc/thread-self").split("/").pop());
}

/**
 * Checks the file `fd` refers to with access(F_OK) while this thread is registered as a
 * prover, and returns the identities the kernel recorded (none: no check reached the program).
 */
export function proveFile(maps: ProofMaps, fd: number): TrapProof {
  const lib = libbpf();
  const tid = Buffer.alloc(4);
  tid.writeUInt32LE(threadId());
  const tgid = Buffer.alloc(4);
  tgid.writeUInt32LE(process.pid);
  const proof = Buffer.alloc(PROOF_LAYOUT.size);
  lib.bpf_map_delete_elem(maps.proofs, tid); // a leftover of an earlier, interrupted proof
  // Counted before registering and uncounted after: the program asks about this thread meanwhile.
  if (maps.proving !== undefined) addProvers(maps.proving, 1);
  try {
    check(lib.bpf_map_update_elem(maps.provers, tid, tgid, 0n) as number, "registering a trap prover", {
      object: PROVERS,
    });
  } catch (error) {
    if (maps.proving !== undefined) addProvers(maps.proving, -1);
    throw error;
  }
  try {
    // The magic link leads to the file itself: the walk is never repeated, nothing is opened.
    accessSync(`/proc/self/fd/${fd}`, constants.F_OK);
  } catch (error) {
    throw new HiveError("TrapNotProven", "checking the trapped file failed", {
      object: `fd ${fd}`,
      hint: "the file vanished or its filesystem refuses access checks; it is resolved again",
      cause: error,
    });
  } finally {
    lib.bpf_map_delete_elem(maps.provers, tid);
    if (maps.proving !== undefined) addProvers(maps.proving, -1);
  }
  const found = lib.bpf_map_lookup_elem(maps.proofs, tid, proof) as number;
  lib.bpf_map_delete_elem(maps.proofs, tid);
  if (found !== 0) return { ids: [] };
  const seen = new Map<string, FileKey>();
  for (const id of decodeProof(proof).ids) seen.set(fileKeyId(id), id);
  return { ids: [...seen.values()] };
}

/**
 * The identity to arm for a file stat() named `statKey`: itself when the kernel checked it,
 * else the first identity the kernel checked (the one every access through this path meets
 * first, e.g. the overlay's inode). Throws TrapNotProven when the kernel checked nothing.
 */
export function provenKey(statKey: FileKey, proof: TrapProof, what: string): FileKey {
  const statId = fileKeyId(statKey);
  if (proof.ids.some((id) => fileKeyId(id) === statId)) return statKey;
  const first = proof.ids[0];
  if (first) return first;
  throw new HiveError("TrapNotProven", `the kernel program saw no check of ${what}: it cannot be watched`, {
    object: what,
    statIdentity: statId,
    hint: "the file's filesystem does not go through inode_permission; trap a file on another filesystem",
  });
}

/** What resolveInRootFd (runtime/discover/safe-path.ts) hands a ProveHook, descriptors still held. */
export interface ResolvedIdentity {
  fileFd: number;
  dirFd: number;
  resolvedPath: string;
  /** As stat() names the file and its directory. */
  key: FileKey;
  parent: FileKey;
}

/**
 * Turns stat()'s identities of a resolved file and its directory into the kernel's. `lower` is
 * the identity the same check reached next, when there was one: the image layer's file beneath an
 * overlay's (runtime/controllers/loader.ts folds the two into one access).
 */
export type ProveHook = (found: ResolvedIdentity) => { key: FileKey; parent: FileKey; lower?: FileKey };

/** The identity a check of `key` reached after it (an overlay's real inode), if any. */
export function lowerOf(key: FileKey, proof: TrapProof): FileKey | undefined {
  const at = proof.ids.findIndex((id) => fileKeyId(id) === fileKeyId(key));
  return at >= 0 ? proof.ids[at + 1] : undefined;
}

/** A ProveHook proving with `maps` in the calling thread. */
export function proveWith(maps: ProofMaps): ProveHook {
  return (found) => {
    const proof = proveFile(maps, found.fileFd);
    const key = provenKey(found.key, proof, found.resolvedPath);
    const lower = lowerOf(key, proof);
    return {
      key,
      parent: provenKey(found.parent, proveFile(maps, found.dirFd), `the directory of ${found.resolvedPath}`),
      ...(lower ? { lower } : {}),
    };
  };
}

/**
 * The proof maps pinned under `pinRoot`, opened once and reopened when the pins are replaced
 * (an agent of another version re-pins; proofs recorded in the old maps would never come).
 */
export class PinnedProofMaps {
  private readonly pinRoot: string;
  private maps: ProofMaps | null = null;
  private pinIdentity = "";

  constructor(pinRoot: string) {
    this.pinRoot = pinRoot;
  }

  /** The maps, or null while no program is loaded on this kernel. */
  current(): ProofMaps | null {
    let identity: string;
    try {
      const st = statSync(join(this.pinRoot, PROVERS));
      identity = `${st.dev}:${st.ino}:${statSync(join(this.pinRoot, PROOFS)).ino}`;
    } catch {
      identity = "";
    }
    if (identity !== this.pinIdentity || this.maps === null) {
      this.close();
      this.maps = identity === "" ? null : openPinnedProofMaps(this.pinRoot);
      this.pinIdentity = identity;
    }
    return this.maps;
  }

  close(): void {
    if (this.maps) closeProofMaps(this.maps);
    this.maps = null;
  }
}

/** Frees the descriptors openPinnedProofMaps gave. */
export function closeProofMaps(maps: ProofMaps): void {
  closeSync(maps.provers);
  closeSync(maps.proofs);
  if (maps.proving !== undefined) closeSync(maps.proving);
}
