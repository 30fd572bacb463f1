/**
 * Finds the host PID of a container, so its root is reachable at /proc/<pid>/root.
 *
 * Order: the containerd task API over the runtime socket (the same socket the kubelet's CRI
 * uses; Kubernetes containers live in containerd namespace `k8s.io`, so the task API answers
 * for them exactly as CRI's verbose ContainerStatus would), then CRI ContainerStatus for
 * CRI runtimes that are not containerd, then a scan of /proc/<pid>/cgroup for the container
 * id (works with any runtime that names cgroups after the container).
 *
 * The gRPC subset (containerd's tasks/v1, cri-api's runtime/v1) is defined once in containerd-api.ts.
 */
import { readdirSync, readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { HiveError } from "../../api/errors.ts";
import { callRuntime, connectRuntimeService, RUNTIME_CALL_TIMEOUT_MS } from "./containerd-api.ts";

export interface ContainerProcess {
  pid: number;
  /** How the PID was found: which path answered. */
  source: "containerd" | "cri" | "cgroup";
}

export interface ContainerRuntime {
  /** Resolves a pod status containerID (`containerd://<id>`, or a bare id) to its running PID. Throws ContainerNotReady/ContainerNotFound. */
  findProcess(containerId: string): Promise<ContainerProcess>;
  close(): void;
}

/** `containerd://abc` → `abc`; ids are hex (containerd, CRI-O, docker) and are checked to be one path segment. */
export function bareContainerId(containerId: string): string {
  const id = containerId.replace(/^[a-z0-9.+-]+:\/\//, "");
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(id)) {
    throw new HiveError("ContainerNotFound", "container id has an unexpected form", { object: containerId });
  }
  return id;
}

export interface RuntimeOptions {
  /** Runtime socket, e.g. /run/containerd/containerd.sock. Empty: only the cgroup scan. */
  socket?: string;
  /** containerd namespaces to look in (Kubernetes: k8s.io). */
  namespaces?: string[];
  /** Try CRI ContainerStatus on the socket as well. */
  cri?: boolean;
  /** Root of the proc filesystem (tests may point it elsewhere). */
  procRoot?: string;
  timeoutMs?: number;
}

/**
 * Whether a /proc/<pid>/cgroup text places the process in the container's cgroup: a path whose
 * last component is the id (cgroupfs: `/kubepods/…/<id>`, ctr: `/default/<id>`) or the runtime's
 * systemd scope (`cri-containerd-<id>.scope`, `crio-<id>.scope`, `docker-<id>.scope`).
 */
export function containerCgroupMatcher(id: string): (cgroupText: string) => boolean {
  const named = new RegExp(`(^|[/:-])${id.replace(/[.]/g, "\\.")}(\\.scope)?$`);
  return (cgroupText) =>
    cgroupText
      .split("\n")
      .some((line) => named.test(line.slice(line.indexOf(":", line.indexOf(":") + 1) + 1)));
}

/** Scans <proc>/<pid>/cgroup for a cgroup path that names the container; the lowest PID is the container's first process. */
export function findPidByCgroup(id: string, procRoot = "/proc"): number | undefined {
  const inContainer = containerCgroupMatcher(id);
  let best: number | undefined;
  for (const entry of (() => {
    try {
      return readdirSync(procRoot);
    } catch {
      return [];
    }
  })()) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (best !== undefined && pid >= best) continue;
    let text: string;
    try {
      text = readFileSync(`${procRoot}/${entry}/cgroup`, "utf8");
    } catch {
      continue; // the process exited while we scanned
    }
    if (inContainer(text)) best = pid;
  }
  return best;
}

export function createContainerRuntime(options: RuntimeOptions = {}): ContainerRuntime {
  const timeoutMs = options.timeoutMs ?? RUNTIME_CALL_TIMEOUT_MS;
  const namespaces = options.namespaces ?? ["k8s.io"];
  let tasks: grpc.Client | undefined;
  let cri: grpc.Client | undefined;
  if (options.socket) {
    tasks = connectRuntimeService(options.socket, "tasks");
    if (options.cri) cri = connectRuntimeService(options.socket, "cri");
  }
  const notReady = (id: string, why: string) =>
    new HiveError("ContainerNotReady", `container has no running process yet (${why})`, {
      object: id,
      hint: "retried with backoff until the container runs",
    });

  return {
    async findProcess(containerId) {
      const id = bareContainerId(containerId);
      let runtimeAnswered = false;
      if (tasks) {
        for (const ns of namespaces) {
          try {
            const res = await callRuntime<{ process?: { pid: number; status: string } }>(
              tasks,
              "Get",
              { container_id: id },
              { namespace: ns, timeoutMs },
            );
            runtimeAnswered = true;
            if (res.process?.status === "RUNNING" && res.process.pid > 0)
              return { pid: res.process.pid, source: "containerd" };
            throw notReady(id, `task is ${res.process?.status ?? "missing"}`);
          } catch (error) {
            if (error instanceof HiveError) throw error;
            const code = (error as grpc.ServiceError).code;
            if (code === grpc.status.NOT_FOUND) {
              runtimeAnswered = true;
              continue;
            }
            if (
              code !== grpc.status.UNAVAILABLE &&
              code !== grpc.status.UNIMPLEMENTED &&
              code !== grpc.status.DEADLINE_EXCEEDED
            ) {
              throw new HiveError("RuntimeUnavailable", "container runtime task lookup failed", {
                object: id,
                cause: error,
              });
            }
          }
        }
      }
      if (cri) {
        try {
          const res = await callRuntime<{ status?: { state: string }; info?: Record<string, string> }>(
            cri,
            "ContainerStatus",
            { container_id: id, verbose: true },
            { timeoutMs },
          );
          runtimeAnswered = true;
          const info = res.info?.info ? (JSON.parse(res.info.info) as { pid?: number }) : {};
          if (res.status?.state === "CONTAINER_RUNNING" && info.pid && info.pid > 0)
            return { pid: info.pid, source: "cri" };
          throw notReady(id, `CRI state ${res.status?.state ?? "unknown"}`);
        } catch (error) {
          if (error instanceof HiveError) throw error;
          if ((error as grpc.ServiceError).code === grpc.status.NOT_FOUND) runtimeAnswered = true;
          // NOT_FOUND / UNAVAILABLE / UNIMPLEMENTED: fall through to the cgroup scan
        }
      }
      const pid = findPidByCgroup(id, options.procRoot);
      if (pid !== undefined) return { pid, source: "cgroup" };
      if (runtimeAnswered) throw notReady(id, "not running in the runtime");
      throw notReady(id, "no process in a cgroup named after it");
    },
    close() {
      tasks?.close();
      cri?.close();
    },
  };
}
