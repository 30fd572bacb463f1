/**
 * Hive installed into a real control plane the way the README's kubectl path does it: `hive render`
 * output applied by the real kubectl (CRDs first, waited for until Established, then the rest), so
 * the RBAC and admission policies the server enforces are the component's own rendering.
 *
 * Agents authenticate as the DaemonSet's pods do: with a ServiceAccount token from the real
 * TokenRequest API, bound to a Pod object on a Node object, so the node claim is the server's own.
 */

import { execFileSync } from "node:child_process";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { AGENT_SELECTOR } from "../../api/meta.ts";
import { type HiveMonitorArgs, type KubernetesObject, renderManifests } from "../../component/index.ts";
import { type AuditEvent, type AuditFilter, AuditLog, actingUser, REFUSAL_CODES } from "./audit-log.ts";
import type { ControlPlane } from "./control-plane.ts";
import { kubectlFor } from "./kubectl-run.ts";

/** Runs the real kubectl against `cp` as the admin; returns its stdout or throws with its stderr. */
export function kubectl(cp: ControlPlane, args: string[], input?: string): string {
  try {
    return execFileSync(...kubectlFor(cp, args), {
      input,
      encoding: "utf8",
      stdio: ["pipe", "pipe", "pipe"],
      maxBuffer: 64 << 20,
    });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`kubectl ${args.join(" ")} failed: ${e.stderr || e.message}`);
  }
}

/** `kubectl apply -f -` of objects, CRDs first and waited for, as the README's kubectl path. */
export function applyObjects(cp: ControlPlane, objects: KubernetesObject[]): void {
  const yamlOf = (list: KubernetesObject[]) => list.map((o) => stringify(o)).join("---\n");
  const crds = objects.filter((o) => o.kind === "CustomResourceDefinition");
  const rest = objects.filter((o) => o.kind !== "CustomResourceDefinition");
  if (crds.length) {
    kubectl(cp, ["apply", "-f", "-"], yamlOf(crds));
    kubectl(cp, [
      "wait",
      "--for=condition=Established",
      "--timeout=60s",
      ...crds.map((c) => `crd/${c.metadata.name}`),
    ]);
  }
  if (rest.length) kubectl(cp, ["apply", "-f", "-"], yamlOf(rest));
}

export interface Installed {
  manifests: KubernetesObject[];
  namespace: string;
  /** The agent ServiceAccount's username. */
  agentUser: string;
  /**
   * A token for the agent's ServiceAccount bound to its Pod (default `hive-agent-<node>`) on
   * `node`, from the TokenRequest API. The Node and the Pod are created if missing.
   */
  agentToken(node: string, pod?: string): Promise<string>;
  /** Declares agent requests a test makes on purpose to see them refused (a forged write). */
  expectRefusals(filter: AuditFilter): void;
  /** Agent requests the server refused (401/403/422), as its audit log records them. */
  refusals(): AuditEvent[];
  /** Throws, naming them, when the server refused an agent request the test did not expect. */
  assertNoRefusals(): void;
}

async function ensureNode(core: CoreV1Api, name: string): Promise<void> {
  const exists = await core.readNode({ name }).then(
    () => true,
    () => false,
  );
  if (!exists)
    await core.createNode({ body: { metadata: { name, labels: { "kubernetes.io/hostname": name } } } });
}

async function ensureAgentPod(core: CoreV1Api, namespace: string, node: string, pod: string) {
  try {
    return await core.readNamespacedPod({ name: pod, namespace });
  } catch {
    return core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: pod, namespace, labels: { ...AGENT_SELECTOR } },
        spec: {
          nodeName: node,
          serviceAccountName: "hive-agent",
          containers: [{ name: "agent", image: "hive:test" }],
        },
      },
    });
  }
}

/** A token from the TokenRequest API for `serviceAccount`, bound to `pod` (which names its node). */
export async function boundToken(
  kc: KubeConfig,
  namespace: string,
  serviceAccount: string,
  pod: { name: string; uid: string },
) {
  const core = kc.makeApiClient(CoreV1Api);
  const res = await core.createNamespacedServiceAccountToken({
    name: serviceAccount,
    namespace,
    body: {
      spec: {
        audiences: ["https://kubernetes.default.svc.cluster.local"],
        expirationSeconds: 3600,
        boundObjectRef: { apiVersion: "v1", kind: "Pod", name: pod.name, uid: pod.uid },
      },
    },
  });
  const token = res.status?.token;
  if (!token) throw new Error(`TokenRequest for ${namespace}/${serviceAccount} returned no token`);
  return token;
}

export function installHive(cp: ControlPlane, args: HiveMonitorArgs = { image: "hive:test" }): Installed {
  const manifests = renderManifests(args);
  applyObjects(cp, manifests);
  const namespace = manifests.find((o) => o.kind === "ServiceAccount")?.metadata.namespace ?? "";
  const agentUser = `system:serviceaccount:${namespace}:hive-agent`;
  const core = cp.adminKubeConfig().makeApiClient(CoreV1Api);
  const expected: AuditFilter[] = [];
  const audit: AuditLog = cp.audit;
  const refusals = () =>
    audit
      .refusals({ user: agentUser })
      .filter((e) => !expected.some((f) => audit.since(0, { ...f, user: agentUser }).includes(e)));
  return {
    manifests,
    namespace,
    agentUser,
    async agentToken(node, pod = `hive-agent-${node}`) {
      await ensureNode(core, node);
      const p = await ensureAgentPod(core, namespace, node, pod);
      return boundToken(cp.adminKubeConfig(), namespace, "hive-agent", {
        name: pod,
        uid: p.metadata?.uid ?? "",
      });
    },
    expectRefusals: (filter) => expected.push(filter),
    refusals,
    assertNoRefusals() {
      const refused = refusals();
      if (refused.length === 0) return;
      throw new Error(
        `the API server refused ${refused.length} agent request(s):\n${AuditLog.describe(refused)}`,
      );
    },
  };
}

export { actingUser, REFUSAL_CODES };
