/**
 * Which callback an alert goes to. Tenancy (api/tenancy.ts): a trap callback of a policy
 * outside the platform namespace is used only when it is under one of the allowed prefixes;
 * otherwise the alert goes to the monitor's callback, the tenant's URL is never contacted,
 * and the refusal is counted and logged (once per namespace and URL).
 */
import { tenantCallbackAllowed } from "../../api/tenancy.ts";
import type { Logger } from "../log.ts";
import type { HiveMetrics } from "../metrics/metrics.ts";
import type { AlertSource } from "./alert-source.ts";

export interface Tenancy {
  platformNamespace: string;
  callbacks: readonly string[];
}

export interface Route {
  /** Where the alert goes; undefined: stdout only. */
  callback: string | undefined;
  /** The tenant's own callback, set aside because tenancy does not allow it. */
  refused?: { namespace: string; url: string };
}

/** The trap's callback, unless tenancy forbids it (then the monitor's). */
export function routeCallback(
  source: Pick<AlertSource, "callback" | "policyNamespace">,
  defaultCallback: string | undefined,
  tenancy: Tenancy | undefined,
): Route {
  const own = source.callback;
  const namespace = source.policyNamespace ?? "default";
  if (!own || !tenancy || namespace === tenancy.platformNamespace)
    return { callback: own || defaultCallback };
  if (tenantCallbackAllowed(own, tenancy.callbacks)) return { callback: own };
  return { callback: defaultCallback, refused: { namespace, url: own } };
}

/** Routes alerts and reports refused tenant callbacks. */
export class CallbackRouter {
  /** Refusals logged already (bounded: a policy author could write many URLs). */
  private readonly refusedLogged = new Set<string>();
  private readonly defaultCallback: string | undefined;
  private readonly tenancy: Tenancy | undefined;
  private readonly logger: Logger;
  private readonly metrics: HiveMetrics;

  constructor(options: {
    defaultCallback: string | undefined;
    tenancy: Tenancy | undefined;
    logger: Logger;
    metrics: HiveMetrics;
  }) {
    this.defaultCallback = options.defaultCallback;
    this.tenancy = options.tenancy;
    this.logger = options.logger;
    this.metrics = options.metrics;
  }

  destinationOf(source: AlertSource): string | undefined {
    const route = routeCallback(source, this.defaultCallback, this.tenancy);
    if (route.refused) this.reportRefused(route.refused.namespace, route.refused.url);
    return route.callback;
  }

  private reportRefused(namespace: string, url: string): void {
    this.metrics.tenantCallbacksRefused.inc({ policy_namespace: namespace });
    const key = `${namespace} ${url}`;
    if (this.refusedLogged.has(key) || this.refusedLogged.size >= 1000) return;
    this.refusedLogged.add(key);
    this.logger.warn("tenant callback not allowed; alerts go to the monitor's callback", {
      policyNamespace: namespace,
      callback: url.slice(0, 200),
      hint: "the monitor's tenantCallbacks option lists the URL prefixes tenant policies may use",
    });
  }
}
