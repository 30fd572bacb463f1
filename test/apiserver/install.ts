/**
 * Installs what the component renders into the stand-in, as `kubectl apply` of `hive render`
 * would: the RBAC and admission policies the stand-in then enforces come from the component's
 * own builders (renderManifests), never from a copy. Returns the user an agent's pod-bound
 * token authenticates as on a node.
 */
import { type HiveMonitorArgs, type KubernetesObject, renderManifests } from "../../component/index.ts";
import { serviceAccountUser, type UserSpec, userInfoOf } from "./authn.ts";
import { type ApiServer, matchesFilter, type RequestFilter, type RequestRecord } from "./server.ts";
import { ApiError } from "./status.ts";

export interface Installed {
  manifests: KubernetesObject[];
  namespace: string;
  /** The agent's ServiceAccount as its pod (default `hive-agent-<node>`) on `node` authenticates. */
  agent(node: string, pod?: string): UserSpec;
  /**
   * Declares requests a test makes with an agent's token on purpose to see them refused (a
   * forged write); any other refusal fails assertNoRefusals.
   */
  expectRefusals(filter: RequestFilter): void;
  /** Requests made with an agent's token that the server refused (401, 403, 422), faults aside. */
  refusals(): RequestRecord[];
  /**
   * Throws, naming them, when the server refused a request of the agent that the test did not
   * expect: the agent must work with exactly the permissions the component renders.
   */
  assertNoRefusals(): void;
}

const REFUSED = new Set([401, 403, 422]);

export function installHive(api: ApiServer, args: HiveMonitorArgs = { image: "hive:test" }): Installed {
  const manifests = renderManifests(args);
  let namespace = "";
  for (const o of manifests) {
    const [group, version] = o.apiVersion.includes("/") ? o.apiVersion.split("/") : ["", o.apiVersion];
    const def = api.store
      .definitions()
      .find((d) => d.group === group && d.version === version && d.kind === o.kind);
    if (!def) throw new Error(`the API stand-in serves no ${o.apiVersion} ${o.kind}: cannot install it`);
    if (o.kind === "ServiceAccount") namespace = o.metadata.namespace ?? "";
    try {
      api.store.create(def, o.metadata.namespace, structuredClone(o));
    } catch (err) {
      if (!(err instanceof ApiError && err.status.reason === "AlreadyExists")) throw err;
      // As `kubectl apply`: what exists is replaced (Hive's CRDs are installed at start already).
      const name = o.metadata.name ?? "";
      const existing = api.store.get(def, o.metadata.namespace, name);
      const body = {
        ...structuredClone(o),
        metadata: { ...o.metadata, resourceVersion: existing.metadata.resourceVersion },
      };
      api.store.update(def, o.metadata.namespace, name, body);
    }
  }
  const agentUser = userInfoOf(serviceAccountUser(namespace, "hive-agent")).username;
  const expected: RequestFilter[] = [];
  const refusals = () =>
    api.requests.filter(
      (r) =>
        r.user === agentUser &&
        REFUSED.has(r.code) &&
        r.injected === undefined &&
        !expected.some((f) => matchesFilter(r, f)),
    );
  return {
    manifests,
    namespace,
    agent: (node, pod = `hive-agent-${node}`) => serviceAccountUser(namespace, "hive-agent", node, pod),
    expectRefusals: (filter) => expected.push({ ...filter, user: agentUser }),
    refusals,
    assertNoRefusals() {
      const refused = refusals();
      if (refused.length === 0) return;
      const lines = refused.map(
        (r) =>
          `${r.code} ${r.verb} ${r.resource} ${r.namespace ?? "(cluster)"}/${r.name ?? ""} as node ${r.node}`,
      );
      throw new Error(`the API server refused ${refused.length} agent request(s):\n${lines.join("\n")}`);
    },
  };
}
