/**
 * The agent's alerts: the pipeline to the callbacks (spool, tenancy, Kubernetes Events), the
 * default callback's credentials read from its Secrets and watched, and each kernel access
 * handed to the pipeline with this node's context.
 */
import { isHiveError } from "../../api/errors.ts";
import { allowedFileFor } from "../alerts/allowed-counts.ts";
import {
  type AlertPipeline,
  alertSourceFromHiveData,
  type CallbackSecretWatch,
  createAlertPipeline,
  createAuthFailureReporter,
  createPodEventRecorder,
  type DestinationOptions,
  watchCallbackSecrets,
} from "../alerts/index.ts";
import type { LoaderOptions } from "../controllers/loader.ts";
import type { KernelWatcher } from "../kernel/contract.ts";
import type { AgentBase } from "./agent-base.ts";
import { callbackDestinations, callbackSecretNames } from "./callback-destinations.ts";

export interface CallbackCredentials {
  /** Why the default callback's credentials are not known yet (alerts to it wait, spooled). */
  pending: string | undefined;
}

export interface AgentAlerts {
  pipeline: AlertPipeline;
  credentials: CallbackCredentials;
  /** Stops watching the callback's Secrets. */
  stopSecretWatch(): Promise<void>;
}

/** Starts the alert pipeline; `kernel` is this node's program while it is the loader. */
export async function startAgentAlerts(
  base: AgentBase,
  kernel: () => KernelWatcher | undefined,
): Promise<AgentAlerts> {
  const credentials: CallbackCredentials = { pending: undefined };
  const destinations = await readDestinations(base, credentials);
  const pipeline = await createAgentPipeline(base, destinations, kernel);
  const secretWatch = watchSecrets(base, pipeline, destinations, credentials);
  return {
    pipeline,
    credentials,
    stopSecretWatch: async () => {
      await secretWatch?.stop();
    },
  };
}

/** The callbacks with their credentials, or the default callback waiting for them. */
async function readDestinations(
  { config, clients, log }: AgentBase,
  credentials: CallbackCredentials,
): Promise<DestinationOptions[]> {
  try {
    return await callbackDestinations(config, clients);
  } catch (error) {
    // An agent restarted while the API server is away still watches and spools: the alerts
    // wait for their credentials (watched below), never sent without them.
    credentials.pending = isHiveError(error) ? error.describe() : String(error);
    log.error("cannot read the callback secrets; alerts to the callback wait until they can be read", {
      error,
    });
    return [{ urlPrefix: config.callback as string, pending: credentials.pending }];
  }
}

function createAgentPipeline(
  { config, clients, log, metrics, pinRoot }: AgentBase,
  destinations: DestinationOptions[],
  kernel: () => KernelWatcher | undefined,
): Promise<AlertPipeline> {
  return createAlertPipeline({
    logger: log.child({ component: "alerts" }),
    metrics,
    ...(config.callback ? { defaultCallback: config.callback } : {}),
    tenancy: { platformNamespace: config.namespace, callbacks: config.tenantCallbacks },
    ...(config.spoolDir ? { spool: { dir: config.spoolDir } } : {}),
    delivery: {
      destinations,
      // A callback refusing the credentials (logged by the dispatcher): also a Warning Event on this Pod.
      onAuthFailure: createAuthFailureReporter({
        core: clients.core,
        namespace: config.namespace,
        podName: config.podName,
        nodeName: config.nodeName,
        logger: log.child({ component: "alerts" }),
      }),
    },
    // What the allow lists let through, for `hive status` (written only by the node loading the kernel).
    allowedFile: allowedFileFor(pinRoot, config.tableDir),
    // The kernel of this node while it is the loader; the event already carries exe and parent.
    ancestors: (process) => kernel()?.ancestors?.(process) ?? [],
    // A Kubernetes Event on the accessed pod per alert (aggregated, rate-limited): `kubectl describe pod`.
    podEvents: createPodEventRecorder({
      core: clients.core,
      nodeName: config.nodeName,
      logger: log.child({ component: "pod-events" }),
      metrics,
    }),
  });
}

/** Watches the callback's Secrets: new credentials replace the destinations (and end the wait). */
function watchSecrets(
  { config, clients, log }: AgentBase,
  pipeline: AlertPipeline,
  initial: DestinationOptions[],
  credentials: CallbackCredentials,
): CallbackSecretWatch | undefined {
  const names = callbackSecretNames(config);
  if (names.length === 0) return undefined;
  return watchCallbackSecrets({
    clients,
    namespace: config.namespace,
    names,
    resolve: () => callbackDestinations(config, clients),
    apply: (list) => {
      credentials.pending = undefined;
      pipeline.setDestinations(list);
    },
    initial,
    logger: log.child({ component: "callback-secrets" }),
  });
}

/** The same for every event; callback, allow list and policy namespace come from each live trap. */
function sourceContextOf({ config, kernelId }: AgentBase) {
  return {
    nodeName: config.nodeName,
    kernelId,
    ...(config.clusterName ? { clusterName: config.clusterName } : {}),
  };
}

/** Hands each access to the pipeline, once per live trap it matched. */
export function accessHandler(base: AgentBase, pipeline: AlertPipeline): LoaderOptions["onAccess"] {
  const sourceContext = sourceContextOf(base);
  return (event, matched) => {
    for (const { data, trap } of matched)
      pipeline.handle(event, alertSourceFromHiveData(data, trap, sourceContext));
  };
}

/** Counts what the kernel's allow rules let through under the trap and entry, as the pipeline counts its own. */
export function allowedHandler(
  base: AgentBase,
  pipeline: AlertPipeline,
): NonNullable<LoaderOptions["onAllowed"]> {
  const sourceContext = sourceContextOf(base);
  return ({ data, trap }, entry, count) =>
    pipeline.addAllowed(alertSourceFromHiveData(data, trap, sourceContext), entry, count);
}
