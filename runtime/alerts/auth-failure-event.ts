/**
 * A callback refusing Hive's credentials (401/403/404, dispatcher `onAuthFailure`, once per
 * episode and destination) becomes a Warning Event on the agent's Pod in the monitor's
 * namespace, so `kubectl get events -n <monitor namespace>` shows that alerts are waiting for
 * a credential fix. The dispatcher logs the failure itself; this only adds the Event.
 * Never throws: a failed write is logged at debug level and forgotten.
 */
import type { CoreApi } from "../k8s/kube-apis.ts";
import type { Logger } from "../log.ts";
import { EVENT_COMPONENT, REPORTING_CONTROLLER } from "./pod-events.ts";

export const AUTH_FAILURE_REASON = "CallbackAuthFailed";

export interface AuthFailureEventOptions {
  core: CoreApi;
  /** The monitor's namespace (where the agent's Pod runs). */
  namespace: string;
  podName: string;
  nodeName: string;
  logger: Logger;
}

export type AuthFailure = { destination: string; status: number | undefined; url: string };

export function createAuthFailureReporter(options: AuthFailureEventOptions): (failure: AuthFailure) => void {
  const { core, namespace, podName, nodeName, logger } = options;
  let sequence = 0;
  return (failure) => {
    const now = new Date();
    // Kubernetes' own naming: the object's name and a unique hexadecimal suffix.
    const name = `${podName}.${now.getTime().toString(16)}${(sequence++).toString(16)}`;
    const message = `alert callback ${failure.url} answered ${failure.status ?? "an error"}: Hive's credentials are refused; alerts wait in the spool and are retried (update the callback headers Secret; it applies without a restart)`;
    core
      .createNamespacedEvent({
        namespace,
        body: {
          metadata: { name, namespace },
          involvedObject: { apiVersion: "v1", kind: "Pod", namespace, name: podName },
          reason: AUTH_FAILURE_REASON,
          message: message.slice(0, 1024),
          type: "Warning",
          count: 1,
          firstTimestamp: now,
          lastTimestamp: now,
          source: { component: EVENT_COMPONENT, host: nodeName },
          reportingComponent: REPORTING_CONTROLLER,
          reportingInstance: podName,
        },
      })
      .catch((error: unknown) => logger.debug("cannot record the callback auth failure Event", { error }));
  };
}
