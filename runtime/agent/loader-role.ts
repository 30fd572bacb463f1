/**
 * The loader role: while this agent holds its node's lock and its kernel's Lease
 * (loader-election.ts), it loads the kernel program and keeps its watch map equal to its
 * kernel's HiveData (runtime/controllers/loader.ts), routing each access to its traps.
 */
import { isHiveError } from "../../api/errors.ts";
import { LABEL_NODE } from "../../api/meta.ts";
import { kernelDataFeed } from "../controllers/feeds.ts";
import { createLoaderController, type LoaderOptions } from "../controllers/loader.ts";
import type { KernelWatcher } from "../kernel/contract.ts";
import type { RoleStart, RunningInformer } from "./agent-roles.ts";
import { guardKernelData, type NodeKernelCheck } from "./kernel-nodes.ts";
import { type AgentContext, attributeWith } from "./node-agent-context.ts";

/** The loader role's term: undefined when the kernel refuses the program (said in `state.loaderFailure`). */
export function loaderRole(ctx: AgentContext, reportsKernel: NodeKernelCheck): RoleStart<"loader"> {
  const { options, feedOptions, writer, discover, policies, state, reconcileObserver } = ctx;
  const { kernelId, nodeName, log } = options;
  return async (signal) => {
    let kernel: KernelWatcher;
    try {
      kernel = await options.openKernel();
      state.loaderFailure = undefined;
    } catch (error) {
      // The kernel refuses the program (no BTF, no kprobes, no privileges): the same on every node of
      // this kernel, so the Lease is kept and the failure is reported by readiness and the log.
      state.loaderFailure = isHiveError(error) ? error.describe() : String(error);
      log.error("cannot load the kernel program; this kernel's files are not watched", { error });
      return undefined;
    }
    if (signal.aborted) {
      // Leadership ended while the program loaded: onStoppedLeading has run already, so close here.
      await kernel.close({ keepPinned: true });
      return undefined;
    }
    state.kernel = kernel;
    // Discover reports the denying traps a kernel cannot deny; until now it assumed it could.
    let denyAvailable = true;
    const onSynced: LoaderOptions["onSynced"] = (entries, lookup) => {
      options.onKernelSynced?.(entries, lookup);
      const available = kernel.denyState?.().available ?? true;
      if (available === denyAvailable) return;
      denyAvailable = available;
      discover.resolveNow("the kernel's deny availability changed");
    };
    const controller = createLoaderController({
      kernelId,
      nodeName,
      kernel,
      writer,
      log: log.child({ controller: "loader" }),
      onAccess: options.onAccess,
      ...(options.onAllowed ? { onAllowed: options.onAllowed } : {}),
      // This node's HiveData is re-resolved by this agent's discover, in memory; other nodes'
      // (sharing this kernel) through the API server.
      resolveLocally: (d) => {
        if (d.metadata.labels?.[LABEL_NODE] !== nodeName) return false;
        discover.resolveNow(`${d.metadata.name} changed`);
        return true;
      },
      onSynced,
      ...(options.onEventDropped ? { onEventDropped: options.onEventDropped } : {}),
      ...(options.observeReconcile ? { observeReconcile: reconcileObserver("loader") } : {}),
      ...(options.orphanGraceMs !== undefined ? { orphanGraceMs: options.orphanGraceMs } : {}),
      ...(options.routingSnapshot ? { snapshot: options.routingSnapshot } : {}),
      platformNamespace: options.namespace,
      ...(options.originOf ? { attribute: attributeWith(options.originOf, discover) } : {}),
    });
    const informers: RunningInformer[] = [
      policies.subscribe((t, p) => controller.onPolicy(t, p)),
      kernelDataFeed(
        options.namespace,
        kernelId,
        guardKernelData(nodeName, reportsKernel, (t, d) => controller.onData(t, d), log),
        feedOptions,
      ),
    ];
    // The role ends only when the agent stops (a restart, an update): the program stays
    // attached and pinned, its events wait in the ring buffer for the next agent, and the
    // watch table still names its slots for `hive status`.
    const close = async () => {
      if (state.kernel === kernel) state.kernel = undefined;
      await kernel.close({ keepPinned: !state.detaching });
    };
    return { controller, informers, close };
  };
}
