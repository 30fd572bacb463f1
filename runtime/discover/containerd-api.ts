/**
 * The one definition of the gRPC subset Hive speaks on a container runtime's socket, and its
 * clients. Used by the agent's PID lookup (container-runtime.ts) and by standalone mode's
 * container list (runtime/standalone/local-containers.ts).
 *
 * The proto subset is a protobufjs JSON descriptor holding only the messages and fields Hive
 * reads, with the field numbers of containerd's api/services/{namespaces,containers,tasks,events,snapshots}/v1,
 * api/types/task, api/types/mount, api/types/event (Envelope) and api/events (the task and container events
 * standalone mode follows), of google/protobuf's Any and Timestamp, and of cri-api's runtime/v1
 * (ContainerStatus, for CRI runtimes that are not containerd).
 */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const labels = { keyType: "string", type: "string", id: 2 };
const listMethod = { List: { requestType: "ListRequest", responseType: "ListResponse" } };
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
                    Namespaces: { methods: listMethod },
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
                    Containers: { methods: listMethod },
                    ListRequest: { fields: { filters: { rule: "repeated", type: "string", id: 1 } } },
                    ListResponse: { fields: { containers: { rule: "repeated", type: "Container", id: 1 } } },
                    // spec: the OCI runtime spec, JSON in an Any (its cgroupsPath names the container's cgroup).
                    Container: {
                      fields: {
                        id: { type: "string", id: 1 },
                        labels,
                        spec: { type: "google.protobuf.Any", id: 5 },
                      },
                    },
                  },
                },
              },
            },
            events: {
              nested: {
                v1: {
                  nested: {
                    Events: {
                      methods: {
                        // Events of every namespace, those matching any of `filters`, until the call ends.
                        Subscribe: {
                          requestType: "SubscribeRequest",
                          responseType: "containerd.types.Envelope",
                          responseStream: true,
                        },
                      },
                    },
                    SubscribeRequest: { fields: { filters: { rule: "repeated", type: "string", id: 1 } } },
                  },
                },
              },
            },
            // The snapshots of a snapshotter and their mounts: which directories are writable layers.
            snapshots: {
              nested: {
                v1: {
                  nested: {
                    Snapshots: {
                      methods: {
                        List: {
                          requestType: "ListSnapshotsRequest",
                          responseType: "ListSnapshotsResponse",
                          responseStream: true,
                        },
                        Mounts: { requestType: "MountsRequest", responseType: "MountsResponse" },
                      },
                    },
                    ListSnapshotsRequest: { fields: { snapshotter: { type: "string", id: 1 } } },
                    ListSnapshotsResponse: { fields: { info: { rule: "repeated", type: "Info", id: 1 } } },
                    Kind: { values: { UNKNOWN: 0, VIEW: 1, ACTIVE: 2, COMMITTED: 3 } },
                    Info: {
                      fields: {
                        name: { type: "string", id: 1 },
                        kind: { type: "Kind", id: 3 },
                        created_at: { type: "google.protobuf.Timestamp", id: 4 },
                      },
                    },
                    MountsRequest: {
                      fields: { snapshotter: { type: "string", id: 1 }, key: { type: "string", id: 2 } },
                    },
                    MountsResponse: {
                      fields: { mounts: { rule: "repeated", type: "containerd.types.Mount", id: 1 } },
                    },
                  },
                },
              },
            },
            tasks: {
              nested: {
                v1: {
                  nested: {
                    Tasks: {
                      methods: {
                        Get: { requestType: "GetRequest", responseType: "GetResponse" },
                        ...listMethod,
                      },
                    },
                    GetRequest: {
                      fields: { container_id: { type: "string", id: 1 }, exec_id: { type: "string", id: 2 } },
                    },
                    GetResponse: { fields: { process: { type: "containerd.v1.types.Process", id: 1 } } },
                    ListRequest: { fields: { filter: { type: "string", id: 1 } } },
                    ListResponse: {
                      fields: { tasks: { rule: "repeated", type: "containerd.v1.types.Process", id: 1 } },
                    },
                  },
                },
              },
            },
          },
        },
        types: {
          nested: {
            Mount: {
              fields: {
                type: { type: "string", id: 1 },
                source: { type: "string", id: 2 },
                options: { rule: "repeated", type: "string", id: 4 },
              },
            },
            Envelope: {
              fields: {
                timestamp: { type: "google.protobuf.Timestamp", id: 1 },
                namespace: { type: "string", id: 2 },
                topic: { type: "string", id: 3 },
                event: { type: "google.protobuf.Any", id: 4 },
              },
            },
          },
        },
        // The payloads of the topics standalone mode follows (an exec's exit carries its exec id in `id`).
        events: {
          nested: {
            TaskStart: {
              fields: { container_id: { type: "string", id: 1 }, pid: { type: "uint32", id: 2 } },
            },
            TaskExit: {
              fields: {
                container_id: { type: "string", id: 1 },
                id: { type: "string", id: 2 },
                pid: { type: "uint32", id: 3 },
              },
            },
            TaskDelete: {
              fields: {
                container_id: { type: "string", id: 1 },
                pid: { type: "uint32", id: 2 },
                id: { type: "string", id: 5 },
              },
            },
            ContainerDelete: { fields: { id: { type: "string", id: 1 } } },
          },
        },
        v1: {
          nested: {
            types: {
              nested: {
                Status: { values: { UNKNOWN: 0, CREATED: 1, RUNNING: 2, STOPPED: 3, PAUSED: 4, PAUSING: 5 } },
                Process: {
                  fields: {
                    container_id: { type: "string", id: 1 },
                    id: { type: "string", id: 2 },
                    pid: { type: "uint32", id: 3 },
                    status: { type: "Status", id: 4 },
                  },
                },
              },
            },
          },
        },
      },
    },
    google: {
      nested: {
        protobuf: {
          nested: {
            Any: { fields: { type_url: { type: "string", id: 1 }, value: { type: "bytes", id: 2 } } },
            Timestamp: { fields: { seconds: { type: "int64", id: 1 }, nanos: { type: "int32", id: 2 } } },
          },
        },
      },
    },
    runtime: {
      nested: {
        v1: {
          nested: {
            RuntimeService: {
              methods: {
                ContainerStatus: {
                  requestType: "ContainerStatusRequest",
                  responseType: "ContainerStatusResponse",
                },
              },
            },
            ContainerStatusRequest: {
              fields: { container_id: { type: "string", id: 1 }, verbose: { type: "bool", id: 2 } },
            },
            ContainerStatusResponse: {
              fields: {
                status: { type: "ContainerStatus", id: 1 },
                info: { keyType: "string", type: "string", id: 2 },
              },
            },
            ContainerState: {
              values: {
                CONTAINER_CREATED: 0,
                CONTAINER_RUNNING: 1,
                CONTAINER_EXITED: 2,
                CONTAINER_UNKNOWN: 3,
              },
            },
            ContainerStatus: {
              fields: { id: { type: "string", id: 1 }, state: { type: "ContainerState", id: 3 } },
            },
          },
        },
      },
    },
  },
};

type Ctor = grpc.ServiceClientConstructor;
interface GrpcPackage {
  containerd: {
    services: {
      namespaces: { v1: { Namespaces: Ctor } };
      containers: { v1: { Containers: Ctor } };
      tasks: { v1: { Tasks: Ctor } };
      events: { v1: { Events: Ctor } };
      snapshots: { v1: { Snapshots: Ctor } };
    };
  };
  runtime: { v1: { RuntimeService: Ctor } };
}

/** The services of the subset: containerd's Namespaces, Containers, Tasks, Events and Snapshots, and CRI's RuntimeService. */
export type RuntimeServiceName = "namespaces" | "containers" | "tasks" | "events" | "snapshots" | "cri";

let definition: protoLoader.PackageDefinition | undefined;
let loaded: GrpcPackage | undefined;

function packageDefinition(): protoLoader.PackageDefinition {
  definition ??= protoLoader.fromJSON(descriptor as Parameters<typeof protoLoader.fromJSON>[0], {
    enums: String,
    longs: Number,
    defaults: true,
  });
  return definition;
}

/** A client of one service of the subset on a unix socket (the caller closes it). */
export function connectRuntimeService(socket: string, service: RuntimeServiceName): grpc.Client {
  loaded ??= grpc.loadPackageDefinition(packageDefinition()) as unknown as GrpcPackage;
  const { namespaces, containers, tasks, events, snapshots } = loaded.containerd.services;
  const constructors: Record<RuntimeServiceName, Ctor> = {
    namespaces: namespaces.v1.Namespaces,
    containers: containers.v1.Containers,
    tasks: tasks.v1.Tasks,
    events: events.v1.Events,
    snapshots: snapshots.v1.Snapshots,
    cri: loaded.runtime.v1.RuntimeService,
  };
  return new constructors[service](`unix://${socket}`, grpc.credentials.createInsecure());
}

type Unary<Res> = (
  req: object,
  meta: grpc.Metadata,
  opts: grpc.CallOptions,
  cb: (error: grpc.ServiceError | null, res: Res) => void,
) => void;

/**
 * How long one call to the container runtime may take by default: long enough for a busy node's
 * containerd (calls of over 7 s were seen on a loaded node), short enough to notice one that hangs.
 */
export const RUNTIME_CALL_TIMEOUT_MS = 15_000;

/** One unary call with a deadline; `namespace` goes in containerd's namespace header. Rejects with the grpc.ServiceError. */
export function callRuntime<Res>(
  client: grpc.Client,
  method: string,
  request: object,
  options: { namespace?: string; timeoutMs: number },
): Promise<Res> {
  const meta = new grpc.Metadata();
  if (options.namespace !== undefined) meta.set("containerd-namespace", options.namespace);
  const fn = (client as unknown as Record<string, Unary<Res>>)[method] as Unary<Res>;
  return new Promise((resolve, reject) => {
    fn.call(client, request, meta, { deadline: Date.now() + options.timeoutMs }, (error, res) =>
      error ? reject(error) : resolve(res),
    );
  });
}

/** containerd's event envelope (api/types/event.proto), as the subset decodes it. */
export interface RuntimeEnvelope {
  timestamp?: { seconds: number; nanos: number } | null;
  namespace: string;
  topic: string;
  event?: { type_url: string; value: Buffer } | null;
}

/** The event payloads of the subset, by their protobuf name (what an Any's type URL ends with). */
export interface RuntimeEventPayloads {
  "containerd.events.TaskStart": { container_id: string; pid: number };
  "containerd.events.TaskExit": { container_id: string; id: string; pid: number };
  "containerd.events.TaskDelete": { container_id: string; id: string; pid: number };
  "containerd.events.ContainerDelete": { id: string };
}
export type RuntimeEventType = keyof RuntimeEventPayloads;

/**
 * The payload of an envelope whose Any holds `type`; undefined when it holds another type.
 * Throws when the bytes do not decode (the caller turns that into a logged value).
 */
export function decodeRuntimeEvent<T extends RuntimeEventType>(
  envelope: RuntimeEnvelope,
  type: T,
): RuntimeEventPayloads[T] | undefined {
  const any = envelope.event;
  // Type URLs are `containerd.events.TaskStart` or `<host>/containerd.events.TaskStart`.
  if (!any || any.type_url.slice(any.type_url.lastIndexOf("/") + 1) !== type) return undefined;
  const message = packageDefinition()[type] as protoLoader.MessageTypeDefinition<object, object>;
  return message.deserialize(any.value) as RuntimeEventPayloads[T];
}

/** Opens containerd's event stream (Events/Subscribe) with `filters`; the caller cancels it. */
export function subscribeRuntimeEvents(
  client: grpc.Client,
  filters: readonly string[],
): grpc.ClientReadableStream<RuntimeEnvelope> {
  const subscribe = (
    client as unknown as Record<string, (req: object) => grpc.ClientReadableStream<RuntimeEnvelope>>
  ).Subscribe as (req: object) => grpc.ClientReadableStream<RuntimeEnvelope>;
  return subscribe.call(client, { filters: [...filters] });
}

/** Every message of a server-streaming call (`namespace` in containerd's header), bounded by a deadline. */
export function collectRuntimeStream<Res>(
  client: grpc.Client,
  method: string,
  request: object,
  options: { namespace?: string; timeoutMs: number },
): Promise<Res[]> {
  const meta = new grpc.Metadata();
  if (options.namespace !== undefined) meta.set("containerd-namespace", options.namespace);
  const fn = (client as unknown as Record<string, (...a: unknown[]) => grpc.ClientReadableStream<Res>>)[
    method
  ] as (req: object, meta: grpc.Metadata, opts: grpc.CallOptions) => grpc.ClientReadableStream<Res>;
  return new Promise((resolve, reject) => {
    const out: Res[] = [];
    const stream = fn.call(client, request, meta, { deadline: Date.now() + options.timeoutMs });
    stream.on("data", (m: Res) => out.push(m));
    stream.on("error", reject);
    stream.on("end", () => resolve(out));
  });
}
