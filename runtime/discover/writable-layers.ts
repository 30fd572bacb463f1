/**
 * Which of the overlayfs snapshotter's numbered directories are image layers, and which are
 * containers' writable layers. Both live side by side under `<snapshots>/<id>/fs`, and a
 * container writes its own: a symlink it plants at a trap's path there must never steer what is
 * armed for every image on the node. containerd's Snapshots API says which snapshots are ACTIVE
 * (writable, in every containerd namespace: the snapshotter's directories are shared); an ACTIVE
 * snapshot's mounts name its directory (the overlay's `upperdir`, or the bind mount's source of
 * one without a parent).
 *
 * A directory is trusted as an image layer only when it was there at the previous look as well
 * and its snapshot is not ACTIVE now: the snapshotter makes a directory before the snapshot is in
 * its database, so one seen once may be a writable layer the API does not show yet.
 *
 * The same mounts give each container's image chain (the overlay's `lowerdir`, topmost first):
 * which layers lie above which, so that a layer's symlink is followed only into the images that
 * hold it (image-layers.ts).
 */
import * as grpc from "@grpc/grpc-js";
import {
  callRuntime,
  collectRuntimeStream,
  connectRuntimeService,
  RUNTIME_CALL_TIMEOUT_MS,
} from "./containerd-api.ts";
import { layerDirs } from "./image-layers.ts";

/** What containerd's snapshots say about the directories. */
export interface SnapshotDirs {
  /** The directory names of every ACTIVE snapshot. */
  writable: Set<string>;
  /** The image chains under those snapshots: layer directory names, topmost first. */
  chains: string[][];
  /** Where containerd keeps those directories: its `snapshots` directories, as the host names them. */
  roots: Set<string>;
}

/** Asks containerd; rejects when it cannot answer. */
export type WritableDirs = () => Promise<SnapshotDirs>;

/** More ACTIVE snapshots than this are not asked for their mounts (the look fails instead). */
const MAX_ACTIVE = 20_000;

const SNAPSHOT_FS = /^(.*\/snapshots)\/([0-9]+)\/fs$/;
const idOf = (path: string | undefined) => (path ? SNAPSHOT_FS.exec(path)?.[2] : undefined);

/**
 * The snapshot directory an ACTIVE snapshot's mounts write to: the overlay's upperdir, or the
 * source of the bind mount of one without a parent (`<root>/snapshots/<id>/fs`, the host's path):
 * its name, and the `snapshots` directory it is in.
 */
export function writableDirOf(
  mounts: readonly { type?: string; source?: string; options?: string[] }[],
): { id: string; root: string } | undefined {
  for (const m of mounts) {
    const upper = m.options?.find((o) => o.startsWith("upperdir="));
    const path = upper ? upper.slice("upperdir=".length) : m.type === "bind" ? m.source : undefined;
    const match = path ? SNAPSHOT_FS.exec(path) : null;
    if (match) return { id: match[2] as string, root: match[1] as string };
  }
  return undefined;
}

/** The image chain under an ACTIVE snapshot: its overlay's lower directories, topmost first. */
export function lowerChainOf(mounts: readonly { options?: string[] }[]): string[] {
  for (const m of mounts) {
    const lower = m.options?.find((o) => o.startsWith("lowerdir="));
    if (!lower) continue;
    const ids = lower.slice("lowerdir=".length).split(":").map(idOf);
    // A chain with a directory outside the snapshots is not one this agent can reason about.
    return ids.every((id) => id !== undefined) ? (ids as string[]) : [];
  }
  return [];
}

/** The ACTIVE snapshots' directories, asked of containerd on its socket. */
export function containerdWritableDirs(options: {
  socket: string;
  snapshotter?: string;
  timeoutMs?: number;
}): WritableDirs {
  const snapshotter = options.snapshotter ?? "overlayfs";
  const timeoutMs = options.timeoutMs ?? RUNTIME_CALL_TIMEOUT_MS;
  let namespaces: grpc.Client | undefined;
  let snapshots: grpc.Client | undefined;
  /** `namespace/key@created` → its directories: an ACTIVE snapshot's mounts never change, so each is asked once. */
  let known = new Map<string, ActiveDirs>();
  return async () => {
    namespaces ??= connectRuntimeService(options.socket, "namespaces");
    snapshots ??= connectRuntimeService(options.socket, "snapshots");
    const listed = await callRuntime<{ namespaces: { name: string }[] }>(
      namespaces,
      "List",
      {},
      { timeoutMs },
    );
    const dirs = new Set<string>();
    const roots = new Set<string>();
    const chains: string[][] = [];
    const seen = new Map<string, ActiveDirs>();
    let activeCount = 0;
    for (const { name: namespace } of listed.namespaces) {
      const pages = await collectRuntimeStream<{
        info: { name: string; kind: string; created_at?: { seconds: number; nanos: number } | null }[];
      }>(snapshots, "List", { snapshotter }, { namespace, timeoutMs });
      for (const info of pages.flatMap((p) => p.info)) {
        if (info.kind !== "ACTIVE") continue;
        if (++activeCount > MAX_ACTIVE) throw new Error(`more than ${MAX_ACTIVE} writable snapshots`);
        // With its creation time: a key removed and prepared again is another directory.
        const id = `${namespace}/${info.name}@${info.created_at?.seconds ?? 0}.${info.created_at?.nanos ?? 0}`;
        let dirsOf = known.get(id);
        if (!dirsOf) {
          const res = await callRuntime<{ mounts: { type: string; source: string; options: string[] }[] }>(
            snapshots,
            "Mounts",
            { snapshotter, key: info.name },
            { namespace, timeoutMs },
          ).catch((error: grpc.ServiceError) => {
            // Removed since the list: nothing to exclude.
            if (error.code === grpc.status.NOT_FOUND) return { mounts: [] };
            throw error;
          });
          const writable = writableDirOf(res.mounts);
          dirsOf = { dir: writable?.id, root: writable?.root, chain: lowerChainOf(res.mounts) };
        }
        seen.set(id, dirsOf);
        if (dirsOf.dir) dirs.add(dirsOf.dir);
        if (dirsOf.root) roots.add(dirsOf.root);
        if (dirsOf.chain.length > 1) chains.push(dirsOf.chain);
      }
    }
    known = seen;
    return { writable: dirs, chains, roots };
  };
}

/** An ACTIVE snapshot's own directory and the image chain under it. */
interface ActiveDirs {
  dir: string | undefined;
  root: string | undefined;
  chain: string[];
}

/**
 * The image layer directories to search, kept by looking again (`refresh`): those present at two
 * looks in a row and not writable at the second. Until a look succeeds, none.
 */
export class TrustedLayers {
  private previous = new Set<string>();
  private trusted: string[] = [];
  private elsewhere: string[] | undefined;
  /** Layer → the layers seen above it in an image's chain (kept while both are there: committed, they never move). */
  private readonly over = new Map<string, Set<string>>();
  private chainsVersion = 0;
  private readonly snapshotsDir: string;
  private readonly writable: WritableDirs;

  constructor(snapshotsDir: string, writable: WritableDirs) {
    this.snapshotsDir = snapshotsDir;
    this.writable = writable;
  }

  /** Looks again; rejects (and keeps the last answer) when containerd cannot say. */
  async refresh(): Promise<void> {
    const present = layerDirs(this.snapshotsDir);
    const { writable, chains, roots } = await this.writable();
    // containerd's writable layers (this agent's own container's among them) are all missing
    // here: this is not containerd's snapshots directory (a node whose containerd keeps its root
    // elsewhere, as k3s's does). Nothing here is armed, and the finder says where it is. Looked
    // at again after the answer: a snapshot's directory is made before containerd lists it.
    const after = new Set(layerDirs(this.snapshotsDir));
    this.elsewhere =
      writable.size > 0 && ![...writable].some((d) => after.has(d)) ? [...roots].sort() : undefined;
    this.trusted = this.elsewhere ? [] : present.filter((d) => this.previous.has(d) && !writable.has(d));
    this.previous = new Set(present);
    this.learnChains(chains, new Set(this.trusted));
  }

  /**
   * containerd's `snapshots` directories (host paths) when the directory looked at is not one of
   * them; undefined when it is, or while that is not known.
   */
  snapshotsElsewhere(): string[] | undefined {
    return this.elsewhere;
  }

  /** Changes whenever what `above` answers may have (a chain learned or forgotten). */
  chainsSignature(): number {
    return this.chainsVersion;
  }

  /** Which trusted layers lie above `layer` in the chains seen so far. */
  above(layer: string): string[] {
    return [...(this.over.get(layer) ?? [])];
  }

  private learnChains(chains: readonly string[][], trusted: Set<string>): void {
    let changed = false;
    for (const [layer, over] of this.over) {
      for (const d of over) if (!trusted.has(d)) changed = over.delete(d) || changed;
      if (!trusted.has(layer) || over.size === 0) changed = this.over.delete(layer) || changed;
    }
    for (const chain of chains) {
      // Only a chain of trusted layers: an untrusted one may be a writable layer named as a lower.
      if (!chain.every((d) => trusted.has(d))) continue;
      for (let i = 1; i < chain.length; i++) {
        const layer = chain[i] as string;
        const over = this.over.get(layer) ?? new Set<string>();
        this.over.set(layer, over);
        for (const d of chain.slice(0, i))
          if (!over.has(d)) {
            over.add(d);
            changed = true;
          }
      }
    }
    if (changed) this.chainsVersion++;
  }

  /** The trusted layer directories that are still there. */
  layers(): string[] {
    const present = new Set(layerDirs(this.snapshotsDir));
    return this.trusted.filter((d) => present.has(d));
  }
}
