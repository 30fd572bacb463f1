/**
 * What the roles of one node's agent share (node-agent.ts makes it once): the options, the
 * feeds' client and page size, the HiveData writer, discover, the shared policy watch, and the
 * state readiness reads (why the program did not load; whether stop() detaches it).
 */
import type { DiscoverController } from "../controllers/discover.ts";
import type { FeedOptions } from "../controllers/feeds.ts";
import type { AttributeAccess } from "../controllers/layer-routing.ts";
import type { DataWriter } from "../controllers/ports.ts";
import type { OriginOf } from "../discover/cgroup-containers.ts";
import type { KernelWatcher } from "../kernel/contract.ts";
import type { SharedPolicies } from "./agent-roles.ts";
import type { NodeAgentOptions } from "./node-agent.ts";

export interface AgentState {
  /** Why this node, elected loader, could not load the kernel program (readiness). */
  loaderFailure: string | undefined;
  /** Set by stop({ detach: true }): the loader's close then unpins and detaches the program. */
  detaching: boolean;
  /** The kernel program while this agent loads it (its deny state is discover's to report). */
  kernel: KernelWatcher | undefined;
}

export interface AgentContext {
  options: NodeAgentOptions;
  feedOptions: FeedOptions;
  writer: DataWriter;
  discover: DiscoverController;
  policies: SharedPolicies;
  state: AgentState;
  /** hive_reconcile_duration_seconds for one controller. */
  reconcileObserver: (controller: "discover" | "loader" | "pods") => (seconds: number) => void;
}

/**
 * An access's container, named by this node: its cgroup, then the pod by uid from discover's
 * cache (this node's pods only: another node's container sharing this kernel is not known here).
 */
export function attributeWith(originOf: OriginOf, discover: DiscoverController): AttributeAccess {
  return (event) => {
    const origin = originOf(event.cgroupId, event.ktimeNs, event.cgroupNames);
    if (!origin) return origin;
    // As the pod was at the access: a relabelling seen since does not unselect it.
    const pod = discover.podByUid(origin.podUid, event.ktimeNs);
    // A kubelet's container of a pod not listed yet (the pod list not in after a restart): it waits.
    if (!pod) return "pod-unknown";
    return {
      pod,
      containerId: origin.containerId,
      scheme: origin.scheme,
      containerName: origin.containerName,
    };
  };
}
