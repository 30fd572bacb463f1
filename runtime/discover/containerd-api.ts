/**
 * The one definition of the gRPC subset Hive speaks on a container runtime's socket, and its
 * clients. Used by the agent's PID lookup (container-runtime.ts) and by standalone mode's
 * container list (runtime/standalone/local-containers.ts).
 *
 * The proto subset is a protobufjs JSON descriptor holding only the messages and fields Hive
 * reads, with the field numbers of containerd's api/services/{namespaces,containers,tasks}/v1
 * and api/types/task, and of cri-api's runtime/v1 (ContainerStatus, for CRI runtimes that are
 * not containerd).
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
    };
  };
  runtime: { v1: { RuntimeService: Ctor } };
}

/** The services of the subset: containerd's Namespaces, Containers and Tasks, and CRI's RuntimeService. */
export type RuntimeServiceName = "namespaces" | "containers" | "tasks" | "cri";

let loaded: GrpcPackage | undefined;

/** A client of one service of the subset on a unix socket (the caller closes it). */
export function connectRuntimeService(socket: string, service: RuntimeServiceName): grpc.Client {
  loaded ??= grpc.loadPackageDefinition(
    protoLoader.fromJSON(descriptor as Parameters<typeof protoLoader.fromJSON>[0], {
      enums: String,
      longs: Number,
      defaults: true,
    }),
  ) as unknown as GrpcPackage;
  const { namespaces, containers, tasks } = loaded.containerd.services;
  const constructors: Record<RuntimeServiceName, Ctor> = {
    namespaces: namespaces.v1.Namespaces,
    containers: containers.v1.Containers,
    tasks: tasks.v1.Tasks,
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
