/**
 * The pods role, one per cluster (the `hive-pods` Lease): HivePolicy status from every node's
 * HiveData and trap errors, the pods no ready agent covers, and the PolicyReports
 * (runtime/reports/) when the monitor asks for them.
 */
import { LABEL_MANAGED_BY, LABEL_POLICY, MANAGED_BY } from "../../api/meta.ts";
import { watchCoverage } from "../controllers/coverage-feeds.ts";
import { allDataFeed, trapErrorFeed } from "../controllers/feeds.ts";
import { createPolicyWriter, trapErrorFromEvent } from "../controllers/kube-ports.ts";
import { createPodsController, type PodsController } from "../controllers/pods.ts";
import { objectKey } from "../controllers/ports.ts";
import { isNotFound } from "../k8s/api-errors.ts";
import { startReportFeeds } from "../reports/report-feeds.ts";
import type { RoleStart, RunningInformer } from "./agent-roles.ts";
import type { AgentContext } from "./node-agent-context.ts";

export function podsRole(ctx: AgentContext): RoleStart<"pods"> {
  const { options, feedOptions, writer, policies, reconcileObserver } = ctx;
  const { clients, nodeName, log } = options;
  return async () => {
    let controller: PodsController | undefined;
    const feeds = options.reports
      ? startReportFeeds({
          ...options.reports,
          feedOptions,
          log: log.child({ controller: "reports" }),
          nodeName,
          platformNamespace: options.namespace,
          onInput: () => controller?.onReportInput(),
        })
      : undefined;
    const coverage = watchCoverage(options.namespace, () => controller?.onCoverage(), {
      ...feedOptions,
      ...(options.uncoveredGraceMs !== undefined ? { graceMs: options.uncoveredGraceMs } : {}),
    });
    controller = createPodsController({
      nodeName,
      platformNamespace: options.namespace,
      uncoveredPods: () => coverage.pods(),
      ...(options.podsUncoveredGauge ? { podsUncoveredGauge: options.podsUncoveredGauge } : {}),
      ...(feeds ? { reports: feeds.reports } : {}),
      writer,
      policyWriter: createPolicyWriter(clients.custom),
      log: log.child({ controller: "pods" }),
      ...(options.observeReconcile ? { observeReconcile: reconcileObserver("pods") } : {}),
      removeErrorReports: async (policy) => {
        const ns = policy.metadata.namespace ?? "default";
        const events = await clients.core.listNamespacedEvent({
          namespace: ns,
          labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_POLICY}=${policy.metadata.name}`,
        });
        for (const ev of events.items) {
          const name = ev.metadata?.name ?? "";
          // A report that cannot be removed expires with the Event TTL; the policy goes on.
          await clients.core.deleteNamespacedEvent({ namespace: ns, name }).catch((error: unknown) => {
            if (!isNotFound(error))
              log.warn("could not remove a trap-error report", { event: `${ns}/${name}`, error });
          });
        }
      },
    });
    const informers: RunningInformer[] = [
      policies.subscribe((t, p) => controller.onPolicy(t, p)),
      allDataFeed(options.namespace, (t, d) => controller.onData(t, d), feedOptions),
      trapErrorFeed((t, ev) => controller.onTrapError(t, objectKey(ev), trapErrorFromEvent(ev)), feedOptions),
      coverage,
    ];
    return { controller, informers, ...(feeds ? { close: () => feeds.stop() } : {}) };
  };
}
