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
 */
import * as grpc from "@grpc/grpc-js";
import {
  callRuntime,
  collectRuntimeStream,
  connectRuntimeService,
  RUNTIME_CALL_TIMEOUT_MS,
} from "./containerd-api.ts";
import { layerDirs } from "./image-layers.ts";

/** What the API said: the directory names of every ACTIVE snapshot. Rejects when it cannot answer. */
export type WritableDirs = () => Promise<Set<string>>;

/** More ACTIVE snapshots than this are not asked for their mounts (the look fails instead). */
const MAX_ACTIVE = 20_000;

/**
 * The snapshot directory an ACTIVE snapshot's mounts write to: the overlay's upperdir, or the
 * source of the bind mount of one without a parent (`…/snapshots/<id>/fs`, the host's path).
 */
export function writableDirOf(
  mounts: readonly { type?: string; source?: string; options?: string[] }[],
): string | undefined {
  const idOf = (path: string | undefined) =>
    path ? /\/snapshots\/([0-9]+)\/fs$/.exec(path)?.[1] : undefined;
  for (const m of mounts) {
    const upper = m.options?.find((o) => o.startsWith("upperdir="));
    const id = upper ? idOf(upper.slice("upperdir=".length)) : m.type === "bind" ? idOf(m.source) : undefined;
    if (id) return id;
  }
  return undefined;
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
  /** `namespace/key@created` → its directory: an ACTIVE snapshot's mounts never change, so each is asked once. */
  let known = new Map<string, string | undefined>();
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
    const seen = new Map<string, string | undefined>();
    let active = 0;
    for (const { name: namespace } of listed.namespaces) {
      const pages = await collectRuntimeStream<{
        info: { name: string; kind: string; created_at?: { seconds: number; nanos: number } | null }[];
      }>(snapshots, "List", { snapshotter }, { namespace, timeoutMs });
      for (const info of pages.flatMap((p) => p.info)) {
        if (info.kind !== "ACTIVE") continue;
        if (++active > MAX_ACTIVE) throw new Error(`more than ${MAX_ACTIVE} writable snapshots`);
        // With its creation time: a key removed and prepared again is another directory.
        const id = `${namespace}/${info.name}@${info.created_at?.seconds ?? 0}.${info.created_at?.nanos ?? 0}`;
        if (known.has(id)) {
          const dir = known.get(id);
          seen.set(id, dir);
          if (dir) dirs.add(dir);
          continue;
        }
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
        const dir = writableDirOf(res.mounts);
        seen.set(id, dir);
        if (dir) dirs.add(dir);
      }
    }
    known = seen;
    return dirs;
  };
}

/**
 * The image layer directories to search, kept by looking again (`refresh`): those present at two
 * looks in a row and not writable at the second. Until a look succeeds, none.
 */
export class TrustedLayers {
  private previous = new Set<string>();
  private trusted: string[] = [];
  private readonly snapshotsDir: string;
  private readonly writable: WritableDirs;

  constructor(snapshotsDir: string, writable: WritableDirs) {
    this.snapshotsDir = snapshotsDir;
    this.writable = writable;
  }

  /** Looks again; rejects (and keeps the last answer) when containerd cannot say. */
  async refresh(): Promise<void> {
    const present = layerDirs(this.snapshotsDir);
    // No snapshot directory (a node of another runtime, no image yet): nothing to ask about.
    const writable = present.length === 0 ? new Set<string>() : await this.writable();
    this.trusted = present.filter((d) => this.previous.has(d) && !writable.has(d));
    this.previous = new Set(present);
  }

  /** The trusted layer directories that are still there. */
  layers(): string[] {
    const present = new Set(layerDirs(this.snapshotsDir));
    return this.trusted.filter((d) => present.has(d));
  }
}
