/**
 * The containers of the local containerd, for traps whose `match` names containers in
 * standalone mode. Three calls on containerd's own API over its socket: the namespaces,
 * each namespace's containers (id + labels, where CRI keeps pod and container names) and
 * its tasks (the running PID, whose /proc/PID/root is the container's root). The path
 * inside each container is then resolved by runtime/discover's in-root walker.
 *
 * Its event stream (which containers start and stop) is read through `events()`: the
 * envelopes are decoded here, followed by container-events.ts.
 *
 * The gRPC subset of containerd's API is defined once in runtime/discover/containerd-api.ts.
 */
import { existsSync } from "node:fs";
import { HiveError } from "../../api/errors.ts";
import type { RuntimeEnvelope } from "../discover/containerd-api.ts";
import type { ContainerChange, ContainerEventSource } from "./container-events.ts";
import type { ContainerRecord, LocalContainer } from "./watch-plan.ts";

/** containerd's container message, as far as Hive reads it. */
interface ContainerMessage {
  id: string;
  labels: Record<string, string>;
  spec?: { type_url: string; value: Uint8Array } | null;
}

/** A runtime spec is a few KiB; more is not one Hive reads. */
const MAX_SPEC_BYTES = 1 << 20;

/** The cgroupsPath of a container's OCI spec (JSON in an Any); undefined when it has none or it does not parse. */
export function cgroupsPathOf(spec: ContainerMessage["spec"]): string | undefined {
  if (!spec || spec.value.length === 0 || spec.value.length > MAX_SPEC_BYTES) return undefined;
  try {
    const path = (
      JSON.parse(Buffer.from(spec.value).toString("utf8")) as { linux?: { cgroupsPath?: unknown } }
    ).linux?.cgroupsPath;
    return typeof path === "string" && path !== "" ? path : undefined;
  } catch {
    return undefined; // not JSON: a spec type this code does not read; the container cannot be told by cgroup
  }
}

export const CONTAINERD_SOCKET = "/run/containerd/containerd.sock";

export interface ContainerLister {
  /** The running containers (a task in RUNNING state). */
  list(): Promise<LocalContainer[]>;
  /** Every container, running or not: whom an access by cgroup may come from (layer-alerts.ts). */
  records(): Promise<ContainerRecord[]>;
  /** containerd's event stream on the same socket (one client, closed with the lister). */
  events(): ContainerEventSource;
  close(): void;
}

/** When containerd stamped the envelope (its clock is this machine's), in ms since the epoch. */
function envelopeTimeMs(envelope: RuntimeEnvelope): number {
  const t = envelope.timestamp;
  return t ? t.seconds * 1000 + t.nanos / 1e6 : Date.now();
}

/**
 * The change a followed event means. A task's exit or deletion concerns its container only
 * when it is the task's init process: an exec'd process carries its exec id in `id`.
 */
export function interpretContainerEvent(
  envelope: RuntimeEnvelope,
  decode: typeof import("../discover/containerd-api.ts").decodeRuntimeEvent,
): ContainerChange | undefined {
  const ns = envelope.namespace;
  switch (envelope.topic) {
    case "/tasks/start": {
      const e = decode(envelope, "containerd.events.TaskStart");
      if (!e) break;
      const container = `${ns}/${e.container_id}`;
      return { reason: `task started: ${container}`, started: { container, atMs: envelopeTimeMs(envelope) } };
    }
    case "/tasks/exit": {
      const e = decode(envelope, "containerd.events.TaskExit");
      if (!e) break;
      if (e.id !== "" && e.id !== e.container_id) return undefined;
      return { reason: `task exited: ${ns}/${e.container_id}` };
    }
    case "/tasks/delete": {
      const e = decode(envelope, "containerd.events.TaskDelete");
      if (!e) break;
      if (e.id !== "" && e.id !== e.container_id) return undefined;
      return { reason: `task deleted: ${ns}/${e.container_id}` };
    }
    case "/containers/delete": {
      const e = decode(envelope, "containerd.events.ContainerDelete");
      if (!e) break;
      return { reason: `container deleted: ${ns}/${e.id}` };
    }
  }
  // A payload of another type than the topic's: still a change, found by the re-list.
  return { reason: envelope.topic };
}

/**
 * A lister on the containerd socket, or undefined when there is no socket (no containerd
 * on this machine: standalone mode then watches host paths only). gRPC is loaded only then.
 */
export async function openContainerLister(
  options: { socket?: string; timeoutMs?: number } = {},
): Promise<ContainerLister | undefined> {
  const socket = options.socket ?? CONTAINERD_SOCKET;
  if (!existsSync(socket)) return undefined;
  const {
    callRuntime,
    connectRuntimeService,
    decodeRuntimeEvent,
    RUNTIME_CALL_TIMEOUT_MS,
    subscribeRuntimeEvents,
  } = await import("../discover/containerd-api.ts");
  const timeoutMs = options.timeoutMs ?? RUNTIME_CALL_TIMEOUT_MS;
  const clients = {
    namespaces: connectRuntimeService(socket, "namespaces"),
    containers: connectRuntimeService(socket, "containers"),
    tasks: connectRuntimeService(socket, "tasks"),
  };
  let events: ContainerEventSource | undefined;
  /** Every container of every namespace, with its task's pid when it has one (any status). */
  const scan = async (): Promise<{ record: ContainerRecord; running: boolean }[]> => {
    try {
      const out: { record: ContainerRecord; running: boolean }[] = [];
      const ns = await callRuntime<{ namespaces: { name: string }[] }>(
        clients.namespaces,
        "List",
        {},
        { timeoutMs },
      );
      for (const { name: namespace } of ns.namespaces) {
        const [cs, ts] = await Promise.all([
          callRuntime<{ containers: ContainerMessage[] }>(
            clients.containers,
            "List",
            {},
            { namespace, timeoutMs },
          ),
          callRuntime<{ tasks: { container_id: string; id: string; pid: number; status: string }[] }>(
            clients.tasks,
            "List",
            {},
            { namespace, timeoutMs },
          ),
        ]);
        // A task's `id` is its container's id (containerd leaves `container_id` empty in List).
        const tasks = new Map(ts.tasks.filter((t) => t.pid > 0).map((t) => [t.container_id || t.id, t]));
        for (const c of cs.containers) {
          const task = tasks.get(c.id);
          const record: ContainerRecord = {
            id: c.id,
            name: c.id,
            runtimeNamespace: namespace,
            labels: c.labels ?? {},
          };
          const cgroupsPath = cgroupsPathOf(c.spec);
          if (cgroupsPath !== undefined) record.cgroupsPath = cgroupsPath;
          if (task) record.pid = task.pid;
          out.push({ record, running: task?.status === "RUNNING" });
        }
      }
      return out;
    } catch (cause) {
      throw new HiveError("RuntimeUnavailable", "listing the containers of containerd failed", {
        object: socket,
        hint: "check that containerd runs and that this user may use its socket (root)",
        cause,
      });
    }
  };
  return {
    async list() {
      // A container without a running task has no root to resolve in; it is not watched.
      return (await scan()).flatMap(({ record, running }) =>
        running && record.pid !== undefined ? [{ ...record, pid: record.pid }] : [],
      );
    },
    async records() {
      return (await scan()).map(({ record }) => record);
    },
    events() {
      if (events) return events;
      const client = connectRuntimeService(socket, "events");
      events = {
        client,
        subscribe: (filters) => subscribeRuntimeEvents(client, filters),
        interpret: (envelope) => interpretContainerEvent(envelope, decodeRuntimeEvent),
      };
      return events;
    },
    close() {
      for (const client of Object.values(clients)) client.close();
      events?.client.close();
    },
  };
}
