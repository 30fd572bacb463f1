/**
 * Which container an access came from, by the cgroup the kernel recorded (bpf_get_current_cgroup_id):
 * what attributes an access to a file shared by many containers (an image layer's), whatever
 * overlay it was reached through. On cgroup v2 a cgroup's id is its directory's inode number, so
 * the directory is found by walking the cgroup filesystem; the kubelet names the levels
 * `…/pod<uid>/<container id>` (cgroupfs driver) or
 * `…/kubepods-<qos>-pod<uid>.slice/cri-containerd-<id>.scope` (systemd driver).
 *
 * Only the kubelet's own levels decide: the pod level, then the level right below it. A process
 * that makes cgroups of its own below its container's (and names them after another container)
 * is still its own container's.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { CgroupNames } from "../kernel/contract.ts";
import { CgroupHandles } from "./cgroup-handles.ts";

/** Directories walked at most per walk (a node has a few per container). */
const MAX_DIRS = 50_000;
const MAX_DEPTH = 8;
/** A container's bundle spec is a few KiB; more is not a runtime's. */
const MAX_SPEC_BYTES = 1 << 20;

export interface CgroupContainer {
  podUid: string;
  containerId: string;
  /** The runtime as container ids name it (`containerd://…`, `cri-o://…`). */
  scheme: string;
}

/** A pod's uid: the API server's (a UUID) or a static pod's (the 32-hex hash of its manifest). */
const POD_LEVEL =
  /(?:^|-)pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32})(?:\.slice)?$/;
const CONTAINER_LEVEL = /^(?:cri-containerd-|crio-|docker-)?([0-9a-f]{64})(?:\.scope)?$/;

/** The pod and container a kubelet-made cgroup path names; undefined for any other cgroup. */
export function parseKubeletCgroup(path: string): CgroupContainer | undefined {
  const parts = path.split("/").filter((p) => p !== "");
  const at = parts.findIndex((p) => POD_LEVEL.test(p));
  const pod = at < 0 ? null : POD_LEVEL.exec(parts[at] as string);
  if (!pod) return undefined;
  const uid = (pod[1] as string).replaceAll("_", "-");
  const level = CONTAINER_LEVEL.exec(parts[at + 1] ?? "");
  if (!level) return undefined;
  const scheme = level[0].startsWith("crio-")
    ? "cri-o"
    : level[0].startsWith("docker-")
      ? "docker"
      : "containerd";
  return { podUid: uid, containerId: level[1] as string, scheme };
}

/**
 * Whether `root` is a cgroup v2 (unified) root: only there is a task's cgroup id its directory's
 * inode. On cgroup v1 the kernel's id names no directory here, and no access could be attributed.
 */
export function isCgroupV2Root(root: string): boolean {
  return existsSync(join(root, "cgroup.controllers"));
}

/** Cgroups found by id and remembered, at most (cleared past it: each is found again in one call). */
const MAX_FOUND = 65_536;

/**
 * cgroup id → path under the cgroup v2 root: asked of the kernel by id where it answers
 * (cgroup-handles.ts), else learnt by walking the tree.
 */
export class CgroupIndex {
  private readonly root: string;
  private readonly handles: CgroupHandles | undefined;
  private paths = new Map<bigint, string>();
  /** Found by id (not by a walk). */
  private readonly found = new Map<bigint, string>();
  /** Depths of the kubelet's container level among the cgroups seen (3, 4 on a plain node). */
  private levels = new Set<number>();
  /** CLOCK_MONOTONIC ns when the last walk began (process.hrtime is CLOCK_MONOTONIC, as bpf_ktime_get_ns). */
  private walkedAt = -1n;
  walks = 0;

  constructor(root: string) {
    this.root = root;
    this.handles = isCgroupV2Root(root) ? openHandles(root) : undefined;
  }

  /** Whether cgroups are found by id (no walks), and if not, why. */
  get byId(): { ok: true } | { ok: false; reason: string } {
    return this.handles ? { ok: true } : { ok: false, reason: "not a cgroup v2 root whose ids open" };
  }

  /**
   * The path of cgroup `id`, as of an access at `atNs` (CLOCK_MONOTONIC). By id where the kernel
   * answers; else by walking again, only when the last walk began before the access: a cgroup
   * made since is then found, and a flood of unknown ids costs one walk, not one per event.
   */
  path(id: bigint, atNs: bigint): string | undefined {
    const known = this.found.get(id) ?? this.paths.get(id);
    if (known !== undefined) return known;
    if (this.handles) {
      try {
        const found = this.handles.lookup(id);
        if ("gone" in found) return undefined;
        if (this.found.size >= MAX_FOUND) this.found.clear();
        this.found.set(id, found.path);
        this.learnLevel(found.path);
        return found.path;
      } catch {
        // An answer other than "gone": walk, as where ids do not open.
      }
    }
    if (this.walkedAt >= atNs) return undefined;
    this.walk();
    return this.paths.get(id);
  }

  private walk(): void {
    this.walkedAt = process.hrtime.bigint();
    this.walks += 1;
    const paths = new Map<bigint, string>();
    const queue: [string, number][] = [["", 0]];
    while (queue.length > 0 && paths.size < MAX_DIRS) {
      const [rel, depth] = queue.shift() as [string, number];
      let entries: import("node:fs").Dirent[];
      try {
        entries = readdirSync(join(this.root, rel), { withFileTypes: true });
      } catch {
        continue; // removed while walked
      }
      for (const e of entries) {
        if (!e.isDirectory()) continue;
        const child = rel === "" ? e.name : `${rel}/${e.name}`;
        try {
          paths.set(statSync(join(this.root, child), { bigint: true }).ino, `/${child}`);
        } catch {
          continue;
        }
        if (depth + 1 < MAX_DEPTH) queue.push([child, depth + 1]);
      }
    }
    this.paths = paths;
    this.levels = new Set();
    for (const path of paths.values()) this.learnLevel(path);
  }

  /** Notes the depth of a kubelet container's cgroup (pathOfGone trusts only those depths). */
  private learnLevel(path: string): void {
    const parts = path.split("/").filter(Boolean);
    const at = parts.findIndex((x) => POD_LEVEL.test(x));
    if (at >= 0 && parts.length === at + 2 && CONTAINER_LEVEL.test(parts[at + 1] as string))
      this.levels.add(at + 2);
  }

  /**
   * The path of a cgroup gone before it was walked, from its names and depth as the kernel
   * recorded them: only at a depth where the kubelet's containers live on this node, so that a
   * cgroup a process made below its own container's, named after another pod, names nobody.
   */
  pathOfGone(names: CgroupNames): string | undefined {
    // Found by id, the depths are learnt from containers seen: a first walk learns them all.
    if (this.levels.size === 0 && this.walks === 0) this.walk();
    if (!this.levels.has(names.level) || /[/]/.test(names.name + names.parent)) return undefined;
    return `/${names.parent}/${names.name}`;
  }
}

/** Cgroup lookups by id on `root`, or undefined where its ids do not open (then the index walks). */
function openHandles(root: string): CgroupHandles | undefined {
  try {
    const handles = new CgroupHandles(root);
    if (handles.unavailable === undefined) return handles;
    handles.close();
  } catch {
    // Not openable: walked instead.
  }
  return undefined;
}

/**
 * The container's name as its runtime was told at creation, from the task bundle's OCI spec
 * (`<stateDir>/io.containerd.runtime.v2.task/<namespace>/<id>/config.json`, written before the
 * container's first instruction): the pod's status names a container only once the kubelet has
 * reported it. Undefined when there is no such bundle or it belongs to another pod.
 */
export function containerNameFromBundle(
  stateDir: string,
  namespaces: readonly string[],
  container: CgroupContainer,
): string | undefined {
  for (const ns of namespaces) {
    let text: string;
    try {
      const file = join(stateDir, "io.containerd.runtime.v2.task", ns, container.containerId, "config.json");
      if (statSync(file).size > MAX_SPEC_BYTES) continue;
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    try {
      const annotations = (JSON.parse(text) as { annotations?: Record<string, string> }).annotations ?? {};
      const uid = annotations["io.kubernetes.cri.sandbox-uid"];
      if (uid !== undefined && uid !== container.podUid) return undefined;
      const name = annotations["io.kubernetes.cri.container-name"];
      if (typeof name === "string" && name !== "") return name;
    } catch {
      // Not JSON: not a bundle this code can read; the pod's status may still name the container.
    }
  }
  return undefined;
}

/** A container of a pod as its cgroup and runtime name it. */
export interface ContainerOrigin extends CgroupContainer {
  /** From the runtime's bundle, when it has one (the pod's status may name it too). */
  containerName?: string;
}

/**
 * The container an access came from by its cgroup id at CLOCK_MONOTONIC `atNs`: null when the
 * cgroup is no pod's container (the host, a system service), undefined when it is not found (gone).
 */
export type OriginOf = (
  cgroupId: bigint,
  atNs: bigint,
  /** The cgroup's directory and parent names as the kernel recorded them (KernelEvent.cgroupNames). */
  names?: CgroupNames,
) => ContainerOrigin | null | undefined;

export function createOriginOf(options: {
  cgroupRoot: string;
  /** containerd's state directory (its task bundles), as the agent sees it. */
  runtimeStateDir: string;
  namespaces: readonly string[];
}): OriginOf {
  const index = new CgroupIndex(options.cgroupRoot);
  return (cgroupId, atNs, names) => {
    // A cgroup removed before the walk (a one-shot container) is named by what the kernel
    // recorded at the access.
    const path = index.path(cgroupId, atNs) ?? (names && index.pathOfGone(names));
    if (path === undefined) return undefined;
    const container = parseKubeletCgroup(path);
    if (!container) return null;
    const name = containerNameFromBundle(options.runtimeStateDir, options.namespaces, container);
    return name === undefined ? container : { ...container, containerName: name };
  };
}
