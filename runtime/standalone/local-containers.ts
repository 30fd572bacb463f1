/**
 * The containers of the local containerd, for traps whose `match` names containers in
 * standalone mode. Three calls on containerd's own API over its socket: the namespaces,
 * each namespace's containers (id + labels, where CRI keeps pod and container names) and
 * its tasks (the running PID, whose /proc/PID/root is the container's root). The path
 * inside each container is then resolved by runtime/discover's in-root walker.
 *
 * The proto subset is a protobufjs JSON descriptor holding only the fields read here, with
 * the field numbers of containerd's api/services/{namespaces,containers,tasks}/v1.
 */
import { existsSync } from "node:fs";
import type * as Grpc from "@grpc/grpc-js";
import { HiveError } from "../errors.ts";
import type { LocalContainer } from "./watch-plan.ts";

export const CONTAINERD_SOCKET = "/run/containerd/containerd.sock";

const labels = { keyType: "string", type: "string", id: 2 };
const descriptor = {
  nested: {
    containerd: {
      nested: {
        services: {
          nested: {
            namespaces: {
              nested: {
                v1: {
                  nested: {
                    Namespaces: {
                      methods: { List: { requestType: "ListRequest", responseType: "ListResponse" } },
                    },
                    ListRequest: { fields: { filter: { type: "string", id: 1 } } },
                    ListResponse: { fields: { namespaces: { rule: "repeated", type: "Namespace", id: 1 } } },
                    Namespace: { fields: { name: { type: "string", id: 1 }, labels } },
                  },
                },
              },
            },
            containers: {
              nested: {
                v1: {
                  nested: {
                    Containers: {
                      methods: { List: { requestType: "ListRequest", responseType: "ListResponse" } },
                    },
                    ListRequest: { fields: { filters: { rule: "repeated", type: "string", id: 1 } } },
                    ListResponse: { fields: { containers: { rule: "repeated", type: "Container", id: 1 } } },
                    Container: { fields: { id: { type: "string", id: 1 }, labels } },
                  },
                },
              },
            },
            tasks: {
              nested: {
                v1: {
                  nested: {
                    Tasks: {
                      methods: { List: { requestType: "ListRequest", responseType: "ListResponse" } },
                    },
                    ListRequest: { fields: { filter: { type: "string", id: 1 } } },
                    ListResponse: { fields: { tasks: { rule: "repeated", type: "Process", id: 1 } } },
                    Process: {
                      fields: {
                        container_id: { type: "string", id: 1 },
                        id: { type: "string", id: 2 },
                        pid: { type: "uint32", id: 3 },
                        status: { type: "Status", id: 4 },
                      },
                    },
                    Status: {
                      values: { UNKNOWN: 0, CREATED: 1, RUNNING: 2, STOPPED: 3, PAUSED: 4, PAUSING: 5 },
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
  },
};

type Ctor = Grpc.ServiceClientConstructor;
interface Services {
  containerd: {
    services: {
      namespaces: { v1: { Namespaces: Ctor } };
      containers: { v1: { Containers: Ctor } };
      tasks: { v1: { Tasks: Ctor } };
    };
  };
}

function list<Res>(
  grpc: typeof Grpc,
  client: Grpc.Client,
  namespace: string | undefined,
  timeoutMs: number,
): Promise<Res> {
  const meta = new grpc.Metadata();
  if (namespace !== undefined) meta.set("containerd-namespace", namespace);
  type ListFn = (
    req: object,
    meta: Grpc.Metadata,
    opts: Grpc.CallOptions,
    cb: (error: Grpc.ServiceError | null, res: Res) => void,
  ) => void;
  const fn = (client as unknown as { List: ListFn }).List;
  return new Promise((resolve, reject) => {
    fn.call(client, {}, meta, { deadline: Date.now() + timeoutMs }, (error, res) =>
      error ? reject(error) : resolve(res),
    );
  });
}

export interface ContainerLister {
  list(): Promise<LocalContainer[]>;
  close(): void;
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
  const [grpc, protoLoader] = await Promise.all([import("@grpc/grpc-js"), import("@grpc/proto-loader")]);
  const timeoutMs = options.timeoutMs ?? 3000;
  const definition = protoLoader.fromJSON(descriptor as Parameters<typeof protoLoader.fromJSON>[0], {
    enums: String,
    defaults: true,
  });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as Services;
  const target = `unix://${socket}`;
  const credentials = grpc.credentials.createInsecure();
  const { namespaces, containers, tasks } = pkg.containerd.services;
  const clients = {
    namespaces: new namespaces.v1.Namespaces(target, credentials),
    containers: new containers.v1.Containers(target, credentials),
    tasks: new tasks.v1.Tasks(target, credentials),
  };
  return {
    async list() {
      try {
        const out: LocalContainer[] = [];
        const ns = await list<{ namespaces: { name: string }[] }>(
          grpc,
          clients.namespaces,
          undefined,
          timeoutMs,
        );
        for (const { name: namespace } of ns.namespaces) {
          const [cs, ts] = await Promise.all([
            list<{ containers: { id: string; labels: Record<string, string> }[] }>(
              grpc,
              clients.containers,
              namespace,
              timeoutMs,
            ),
            list<{ tasks: { container_id: string; id: string; pid: number; status: string }[] }>(
              grpc,
              clients.tasks,
              namespace,
              timeoutMs,
            ),
          ]);
          // A task's `id` is its container's id (containerd leaves `container_id` empty in List).
          const running = new Map(
            ts.tasks
              .filter((t) => t.status === "RUNNING" && t.pid > 0)
              .map((t) => [t.container_id || t.id, t.pid]),
          );
          for (const c of cs.containers) {
            const pid = running.get(c.id);
            // A container without a running task has no root to resolve in; it is not watched.
            if (pid === undefined) continue;
            out.push({ id: c.id, name: c.id, pid, runtimeNamespace: namespace, labels: c.labels ?? {} });
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
    },
    close() {
      for (const client of Object.values(clients)) client.close();
    },
  };
}
