/**
 * Standalone mode's equivalent of discover + HiveData: every trap of every policy file,
 * resolved on this machine to the files the kernel identifies (device + inode), each with its
 * alert source. The kernel map's entries made from a plan are watch-table.ts's.
 *
 * Where a trap applies: a trap without `match` watches the host's own path; a trap with
 * `match` watches the path inside each container of the local containerd it matches (the
 * same filters as in a cluster, read from the container's CRI labels). Paths are resolved
 * with the discover module's in-root walker in both cases, so a container's symlink can
 * never lead Hive to a host file.
 */
import { hostname } from "node:os";
import type { V1Pod } from "@kubernetes/client-node";
import { HiveError, isHiveError } from "../../api/errors.ts";
import {
  containerNameMatcher,
  type HivePolicy,
  type HiveTrap,
  LABEL_TRAP_ID,
  parseMode,
  trapDeny,
  trapId,
} from "../../api/index.ts";
import type { AlertSource } from "../alerts/alert-source.ts";
import { type AllowFiles, exactAllowPaths } from "../alerts/allowlist.ts";
import { podMatches } from "../controllers/match.ts";
import { openContainerProcess } from "../discover/container-process.ts";
import { resolveInProcessRoot } from "../discover/file-resolver.ts";
import { type ResolvedFile, type ResolveOptions, resolveInRoot } from "../discover/safe-path.ts";
import type { FileKey } from "../kernel/contract.ts";
import type { ProveHook } from "../kernel/trap-proof.ts";
import { type LayerFile, type LayerMiss, type LayerSource, planLayers } from "./layer-plan.ts";

/** A container of the local runtime as its metadata names it, running or not. */
export interface ContainerRecord {
  id: string;
  name: string;
  /** The runtime's namespace (containerd's, e.g. "default" or "k8s.io"). */
  runtimeNamespace: string;
  labels: Readonly<Record<string, string>>;
  /** Its OCI spec's `linux.cgroupsPath`, as the runtime was told (absent: the spec gives none). */
  cgroupsPath?: string;
  /** PID of its task's init process on the host, when it has a task. */
  pid?: number;
}

/** A running container of the local runtime, as standalone mode resolves paths in it. */
export interface LocalContainer extends ContainerRecord {
  /** PID of the container's init process on the host: its root is /proc/PID/root. */
  pid: number;
}

/** CRI labels containerd puts on the containers of Kubernetes pods. */
const POD_NAME = "io.kubernetes.pod.name";
const POD_NAMESPACE = "io.kubernetes.pod.namespace";
const CONTAINER_NAME = "io.kubernetes.container.name";

export type WatchTarget = { kind: "host" } | { kind: "container"; container: LocalContainer };

export interface TrapRef {
  policy: HivePolicy;
  /** Where the policy came from, for messages: `file.yaml document 2`. */
  origin: string;
  trapIndex: number;
  trap: HiveTrap;
  trapId: string;
}

/** One trap × target resolved to a file. */
export interface WatchedFile {
  ref: TrapRef;
  target: WatchTarget;
  resolved: ResolvedFile;
  source: AlertSource;
}

/** A trap × target that could not be resolved, with the reason a user can act on. */
export interface UnresolvedTrap {
  ref: TrapRef;
  target: WatchTarget;
  error: HiveError;
  /** The directory that would hold the file, when it exists: watched so that the file's creation is noticed. */
  parent?: FileKey;
}

export interface WatchPlan {
  files: WatchedFile[];
  unresolved: UnresolvedTrap[];
  /** Traps with a `match` that matched no running container (nothing to resolve yet). */
  unmatched: TrapRef[];
  /** The image layers' files of traps with a `match`, armed before any container runs (layer-plan.ts). */
  layers?: LayerFile[];
  layerMisses?: LayerMiss[];
}

export interface PlanContext {
  nodeName?: string;
  kernelId: string;
  /** Callback for traps without their own (the `--callback` option). */
  defaultCallback?: string;
  /** Containers of the local runtime; absent when none is reachable. */
  containers?: readonly LocalContainer[];
  /** Root of the host filesystem, "/" except in tests. */
  hostRoot?: string;
  /** The proc filesystem the containers' processes are reached through, "/proc" except in tests. */
  procRoot?: string;
  /** Proves each resolved file with the kernel program (trap-proof.ts); absent: stat()'s identity is armed. */
  prove?: ProveHook;
  /** The node's image layers; absent: traps are armed in running containers only. */
  layers?: LayerSource;
}

export function trapRefs(
  documents: readonly { file: string; index: number; policy: HivePolicy }[],
): TrapRef[] {
  return documents.flatMap((doc) =>
    doc.policy.spec.traps.map((trap, trapIndex) => ({
      policy: doc.policy,
      origin: `${doc.file} document ${doc.index}`,
      trapIndex,
      trap,
      trapId: trapId(
        { namespace: doc.policy.metadata.namespace, name: doc.policy.metadata.name ?? "" },
        trap,
      ),
    })),
  );
}

function containerName(c: ContainerRecord): string {
  return c.labels[CONTAINER_NAME] ?? c.name;
}

/** `namespace/id`, as container events name a container. */
export const containerKey = (c: ContainerRecord) => `${c.runtimeNamespace}/${c.id}`;

/** A container as logs and `hive status` name it: `name (first 12 characters of the id)`. */
export function containerLabel(c: ContainerRecord): string {
  return `${c.name} (${c.id.slice(0, 12)})`;
}

/**
 * The pod a local container stands for, as far as its CRI labels tell. It has no IPs: a pod
 * IP is not something a standalone container has, so traps with an `ip` filter match nothing here.
 */
function podOf(c: ContainerRecord): V1Pod {
  return {
    metadata: {
      name: c.labels[POD_NAME],
      namespace: c.labels[POD_NAMESPACE] ?? c.runtimeNamespace,
      labels: { ...c.labels },
    },
  };
}

/** The reference design's filters, applied to a local container (all given filters must hold). */
export function containerMatches(trap: HiveTrap, c: ContainerRecord): boolean {
  if (!podMatches(trap.match, podOf(c))) return false;
  const pattern = trap.match?.["container-name"];
  if (pattern === undefined) return true;
  // Policy files are validated before a plan is made; a pattern RE2 cannot run matches nothing.
  const matcher = containerNameMatcher(pattern);
  return matcher.ok && matcher.matches(containerName(c));
}

export function alertSource(ref: TrapRef, target: WatchTarget, context: PlanContext): AlertSource {
  const callback = ref.trap.callback ?? context.defaultCallback;
  const annotations: AlertSource["annotations"] = {
    hive_policy_name: ref.policy.metadata.name ?? "",
    path: ref.trap.path,
    node_name: context.nodeName ?? hostname(),
  };
  if (target.kind === "container") {
    const c = target.container;
    annotations.container_id = c.id;
    annotations.container_name = containerName(c);
    // Outside Kubernetes a container has no pod: the alert's pod names the container and its
    // runtime namespace, so that responders still see which container it was.
    annotations.pod_name = c.labels[POD_NAME] ?? c.name;
    annotations.namespace = c.labels[POD_NAMESPACE] ?? c.runtimeNamespace;
  }
  const source: AlertSource = {
    annotations,
    labels: { [LABEL_TRAP_ID]: ref.trapId },
    nodeName: context.nodeName ?? hostname(),
    kernelId: context.kernelId,
  };
  if (callback !== undefined) source.callback = callback;
  const deny = trapDeny(ref.trap);
  if (deny) source.deny = deny;
  if (ref.policy.metadata.namespace !== undefined) source.policyNamespace = ref.policy.metadata.namespace;
  // The trap's allow list, as a cluster's loader takes it from the live policy, and the files at
  // its exact paths on the same target, found like the trapped path (discover's job in a cluster).
  if (ref.trap.allow !== undefined && ref.trap.allow.length > 0) {
    source.allow = ref.trap.allow;
    source.allowFiles = allowFilesOn(ref.trap, target, context);
    if (target.kind === "host") source.allowHost = true;
  }
  return source;
}

/**
 * The files at a trap's exact allow paths on `target`; a path that does not lead to a file, or
 * leads to one only through a symlink (the kernel records the file's own path: the entry cannot
 * hold, and the kernel decides by the file alone), is left out.
 */
function allowFilesOn(trap: HiveTrap, target: WatchTarget, context: PlanContext): AllowFiles {
  const files = new Map<string, FileKey[]>();
  for (const path of exactAllowPaths(trap)) {
    try {
      const found = resolveOn(target, context, path);
      if (found.fileType === "file" && found.resolvedPath === path) files.set(path, [found.key]);
    } catch (error) {
      if (!isHiveError(error)) throw error; // not found, escapes the root…: the entry cannot hold
    }
  }
  return files;
}

function targetsOf(ref: TrapRef, context: PlanContext): WatchTarget[] {
  if (ref.trap.match === undefined) return [{ kind: "host" }];
  return (context.containers ?? [])
    .filter((c) => containerMatches(ref.trap, c))
    .map((container) => ({ kind: "container", container }));
}

/**
 * Resolves `path` on the host or in a container. A container's root is reached through its
 * process held open and checked to be the container's (a PID reused by a host process since the
 * runtime listed it must never lead to the host root).
 */
function resolveOn(
  target: WatchTarget,
  context: PlanContext,
  path: string,
  options?: ResolveOptions,
): ResolvedFile {
  if (target.kind === "host") return resolveInRoot(context.hostRoot ?? "/", path, options, context.prove);
  const { pid, id } = target.container;
  const process = openContainerProcess(context.procRoot ?? "/proc", pid, id);
  try {
    return resolveInProcessRoot(process, path, options, context.prove);
  } finally {
    process.close();
  }
}

/** The key of the directory a missing file would be created in, if that directory exists. */
function parentKey(target: WatchTarget, context: PlanContext, path: string): FileKey | undefined {
  const dir = path.slice(0, path.lastIndexOf("/")) || "/";
  try {
    const resolved = resolveOn(target, context, dir);
    return resolved.fileType === "directory" ? resolved.key : undefined;
  } catch {
    return undefined; // the directory is missing too: nothing to watch for now
  }
}

/** The trap's mode as permission bits; one that is not octal or would escalate is the trap's error. */
function modeOf(path: string, mode: number | string): number {
  try {
    return parseMode(mode);
  } catch (error) {
    throw new HiveError("PolicyInvalid", (error as Error).message, { object: path });
  }
}

/** Resolves every trap on every target it applies to. Never throws for a trap: failures are data. */
export function planWatches(refs: readonly TrapRef[], context: PlanContext): WatchPlan {
  const plan: WatchPlan = { files: [], unresolved: [], unmatched: [] };
  for (const ref of refs) {
    const targets = targetsOf(ref, context);
    if (targets.length === 0) plan.unmatched.push(ref);
    for (const target of targets) {
      const outcome = resolveTrap(ref, target, context);
      if ("resolved" in outcome) plan.files.push(outcome);
      else plan.unresolved.push(outcome);
    }
  }
  if (context.layers) {
    const layers = planLayers(refs, context.layers);
    plan.layers = layers.files;
    plan.layerMisses = layers.misses;
  }
  return plan;
}

/** One trap on one target: the file it watches, or why none (and the directory to wait in). */
function resolveTrap(ref: TrapRef, target: WatchTarget, context: PlanContext): WatchedFile | UnresolvedTrap {
  try {
    const options: { create?: boolean; mode?: number } = {};
    if (ref.trap.create) options.create = true;
    if (ref.trap.mode !== undefined) options.mode = modeOf(ref.trap.path, ref.trap.mode);
    const resolved = resolveOn(target, context, ref.trap.path, options);
    if (resolved.fileType === "directory") {
      throw new HiveError("PathInvalid", "trap path is a directory, not a file", {
        object: ref.trap.path,
        hint: "trap a file; Hive reports accesses to files",
      });
    }
    return { ref, target, resolved, source: alertSource(ref, target, context) };
  } catch (error) {
    if (!isHiveError(error)) throw error;
    const miss: UnresolvedTrap = { ref, target, error };
    const parent = error.code === "FileNotFound" ? parentKey(target, context, ref.trap.path) : undefined;
    if (parent !== undefined) miss.parent = parent;
    return miss;
  }
}

export { trapAccesses } from "../controllers/live-traps.ts";
// The kernel map's content for a plan, kept importable from here.
export { buildWatchTable, counterSlots, type SlotInfo, sourcesFor, type WatchTable } from "./watch-table.ts";
