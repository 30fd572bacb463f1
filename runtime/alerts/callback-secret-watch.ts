/**
 * Keeps the callback credentials current: watches the Secrets the monitor's callback reads
 * (headers, signing key) and, when one changes, resolves the destinations again and hands
 * them to the pipeline (`AlertPipeline.setDestinations`), so a rotated token applies without
 * an agent restart and the alerts that waited in the spool meanwhile are sent with it.
 *
 * One informer per Secret, narrowed by `fieldSelector=metadata.name=NAME`: the API server
 * authorizes such a list/watch against the Role's `resourceNames`, so the agent still reaches
 * only the Secrets it names. Changes are applied one resolution at a time; a change that comes
 * during a resolution causes one more. A resolution that fails (Secret deleted, a bad header)
 * is logged and the last good credentials stay in use. Identical credentials are not applied
 * again (the first list after start repeats what the agent read at start).
 */
import type { V1Secret } from "@kubernetes/client-node";
import { HiveError, isHiveError } from "../../api/errors.ts";
import { createInformer, type Informer } from "../k8s/informer.ts";
import type { CoreApi, CustomApi } from "../k8s/kube-apis.ts";
import type { WatchApi } from "../k8s/kube-watch.ts";
import type { Logger } from "../log.ts";
import type { DestinationOptions } from "./delivery/dispatcher.ts";

export interface CallbackSecretWatchOptions {
  clients: { core: CoreApi; custom: CustomApi; watch: WatchApi };
  namespace: string;
  /** The Secrets whose changes matter (duplicates ignored). */
  names: readonly string[];
  /** Reads the Secrets and builds the destinations (the same function used at start). */
  resolve: () => Promise<DestinationOptions[]>;
  /** Installs new destinations (AlertPipeline.setDestinations). */
  apply: (destinations: DestinationOptions[]) => void;
  /** What `apply` holds already (read at start); without it the first resolution is applied. */
  initial?: readonly DestinationOptions[];
  logger: Logger;
  /** Informer retry backoff (ms); default the informer's. */
  backoff?: { baseMs: number; maxMs: number };
}

export interface CallbackSecretWatch {
  /** Resolves once every Secret's first list was seen and any resolution it caused is done. */
  readonly whenSynced: Promise<void>;
  /** Resolves when no resolution is running or queued. */
  idle(): Promise<void>;
  stop(): Promise<void>;
}

/** Compares destinations by value, secrets included, without keeping the secrets in a log. */
function fingerprint(list: readonly DestinationOptions[]): string {
  return JSON.stringify(list, (_key, value: unknown) => {
    if (Buffer.isBuffer(value)) return `b64:${value.toString("base64")}`;
    // JSON.stringify turns a Buffer into {type:"Buffer",data:[…]} before the replacer sees it.
    if (
      value !== null &&
      typeof value === "object" &&
      (value as { type?: unknown }).type === "Buffer" &&
      Array.isArray((value as { data?: unknown }).data)
    ) {
      return `b64:${Buffer.from((value as { data: number[] }).data).toString("base64")}`;
    }
    return value;
  });
}

export function watchCallbackSecrets(options: CallbackSecretWatchOptions): CallbackSecretWatch {
  const { logger, namespace } = options;
  const names = [...new Set(options.names)];
  let current = options.initial ? fingerprint(options.initial) : undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = false;
  const changed = new Set<string>();

  const resolveOnce = async (): Promise<void> => {
    const secrets = [...changed].sort();
    changed.clear();
    let list: DestinationOptions[];
    try {
      list = await options.resolve();
    } catch (error) {
      logger.error("cannot read the changed callback secrets; the previous credentials stay in use", {
        error: isHiveError(error)
          ? error
          : new HiveError("ApiRequestFailed", "cannot resolve the callback destinations", { cause: error }),
        secrets,
      });
      return;
    }
    if (stopped) return;
    const print = fingerprint(list);
    if (print === current) return;
    current = print;
    options.apply(list);
    logger.info("callback secrets changed; new credentials applied without a restart", {
      namespace,
      secrets,
      destinations: list.map((d) => d.urlPrefix),
    });
  };

  const schedule = (secret: V1Secret) => {
    if (stopped) return;
    changed.add(secret.metadata?.name ?? "");
    if (running) {
      again = true;
      return;
    }
    running = (async () => {
      do {
        again = false;
        await resolveOnce();
      } while (again && !stopped);
      running = undefined;
    })();
  };

  const informers: Informer<V1Secret>[] = names.map((name) =>
    createInformer<V1Secret>({
      resource: { group: "", version: "v1", plural: "secrets", namespace },
      clients: options.clients,
      fieldSelector: `metadata.name=${name}`,
      logger,
      ...(options.backoff ? { backoff: options.backoff } : {}),
      // Only the version matters to the cache; the values are read again by `resolve`.
      transform: (s) => ({ metadata: s.metadata ?? {} }) as V1Secret,
      handlers: { add: schedule, update: schedule, delete: schedule },
    }),
  );
  const idle = async () => {
    while (running) await running;
  };
  const whenSynced = Promise.all(informers.map((i) => i.start())).then(idle);
  // A failed start is retried inside the informer; nobody has to await this.
  whenSynced.catch(() => {});
  return {
    whenSynced,
    idle,
    async stop() {
      stopped = true;
      await Promise.all(informers.map((i) => i.stop()));
      await idle();
    },
  };
}
