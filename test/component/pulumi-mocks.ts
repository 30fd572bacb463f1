/**
 * Runs Pulumi programs offline with `pulumi.runtime.setMocks`: every resource the program
 * registers is recorded with its type token, name and the inputs Pulumi serialized for it
 * (what the engine would send to the Kubernetes provider).
 */
import * as pulumi from "@pulumi/pulumi";

export interface RecordedResource {
  type: string;
  name: string;
  /** Names of the resources this one was registered as depending on (dependsOn and parent-less inputs). */
  dependsOn: string[];
  // biome-ignore lint/suspicious/noExplicitAny: inputs are whatever the program passed
  inputs: any;
}

export function installMocks(): RecordedResource[] {
  const recorded: RecordedResource[] = [];
  const dependencies = new Map<string, string[]>();
  pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        recorded.push({
          type: args.type,
          name: args.name,
          inputs: args.inputs,
          dependsOn: dependencies.get(args.name) ?? [],
        });
        return { id: `${args.name}-id`, state: args.inputs };
      },
      call: (args) => args.inputs,
    },
    "hive",
    "test",
    false,
  );
  // The mocks API does not pass dependencies to newResource; read them from the registration
  // request the SDK sends to the (mock) resource monitor, before it reaches newResource.
  const monitor = pulumi.runtime.getMonitor() as unknown as {
    registerResource(req: RegisterRequest, callback: unknown): unknown;
  };
  const register = monitor.registerResource.bind(monitor);
  monitor.registerResource = (req, callback) => {
    dependencies.set(
      req.getName(),
      req.getDependenciesList().map((urn) => urn.slice(urn.lastIndexOf("::") + 2)),
    );
    return register(req, callback);
  };
  return recorded;
}

interface RegisterRequest {
  getName(): string;
  getDependenciesList(): string[];
}

/** The value of an Output, once Pulumi has resolved it. */
export function resolve<T>(output: pulumi.Output<T>): Promise<T> {
  return new Promise((done) => output.apply(done));
}

/** Waits until no new resource has been registered for a few turns of the event loop. */
export async function settle(recorded: RecordedResource[]): Promise<void> {
  let last = -1;
  let stable = 0;
  while (stable < 5) {
    await new Promise((r) => setTimeout(r, 10));
    stable = recorded.length === last ? stable + 1 : 0;
    last = recorded.length;
  }
}

/** The recorded Kubernetes objects (everything but component resources), keyed kind/namespace/name. */
export function kubernetesObjects(recorded: RecordedResource[]) {
  return recorded.filter((r) => r.type.startsWith("kubernetes:"));
}

// biome-ignore lint/suspicious/noExplicitAny: any Kubernetes object
export function objectKey(o: any): string {
  return `${o.kind}/${o.metadata?.namespace ?? ""}/${o.metadata?.name}`;
}

/** A value registered as a secret: Pulumi serializes it inside this wrapper. */
export function isSecretWrapper(value: unknown): value is { value: unknown } {
  return (
    value !== null &&
    typeof value === "object" &&
    (value as Record<string, unknown>)[pulumi.runtime.specialSigKey] === pulumi.runtime.specialSecretSig
  );
}

/** Paths under `value` where `needle` occurs in a string outside any secret wrapper. */
export function plainOccurrences(value: unknown, needle: string, path = ""): string[] {
  if (isSecretWrapper(value)) return [];
  if (typeof value === "string") return value.includes(needle) ? [path] : [];
  if (value !== null && typeof value === "object")
    return Object.entries(value).flatMap(([k, v]) => plainOccurrences(v, needle, `${path}.${k}`));
  return [];
}

/** The inputs with every secret wrapper replaced by its value: what the cluster receives. */
export function unwrapSecrets(value: unknown): unknown {
  if (isSecretWrapper(value)) return unwrapSecrets(value.value);
  if (Array.isArray(value)) return value.map(unwrapSecrets);
  if (value !== null && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, unwrapSecrets(v)]));
  return value;
}
