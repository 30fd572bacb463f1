/**
 * Writing a group's Event (pod-event-groups.ts) through the API: created the first time (or
 * patched when it exists already), patched afterwards, and created again once it expired
 * (Events have a TTL). A failed write keeps its alerts for the next flush and is logged;
 * nothing here throws.
 */
import type { CoreApi } from "../k8s/kube-apis.ts";
import type { Logger } from "../log.ts";
import type { HiveMetrics } from "../metrics/metrics.ts";
import { groupEvent, groupEventPatch } from "./pod-event-content.ts";
import { type Group, startWrite } from "./pod-event-groups.ts";

const statusOf = (error: unknown): number | undefined => (error as { code?: number }).code;

export class PodEventWriter {
  private readonly core: CoreApi;
  private readonly nodeName: string;
  private readonly logger: Logger;
  private readonly metrics: HiveMetrics | undefined;

  constructor(options: {
    core: CoreApi;
    nodeName: string;
    logger: Logger;
    metrics?: HiveMetrics | undefined;
  }) {
    this.core = options.core;
    this.nodeName = options.nodeName;
    this.logger = options.logger;
    this.metrics = options.metrics;
  }

  /** Writes the group's unwritten alerts into its Event. */
  async write(g: Group): Promise<void> {
    const { count, taken } = startWrite(g, performance.now());
    try {
      g.written = await this.store(g, count, taken);
    } catch (error) {
      g.unwritten += taken;
      this.metrics?.kubernetesEvents.inc({ result: "failed" });
      this.logger.warn("cannot write a Kubernetes Event for an alert", {
        event: `${g.namespace}/${g.name}`,
        status: statusOf(error),
        message: (error as Error).message,
      });
    }
  }

  /** Makes the group's Event hold `count` alerts; returns the count it holds now. */
  private async store(g: Group, count: number, taken: number): Promise<number> {
    if (!g.created) {
      if (!(await this.create(g, count)) && !(await this.patch(g, count)))
        throw new Error("event neither creatable nor patchable");
      g.created = true;
      return count;
    }
    if (await this.patch(g, count)) return count;
    // Expired: a new Event starts with what this write took.
    g.first = g.last;
    if (!(await this.create(g, taken))) throw new Error("expired event could not be created again");
    return taken;
  }

  /** False when the Event exists already. */
  private async create(g: Group, count: number): Promise<boolean> {
    const body = groupEvent(g, count, this.nodeName);
    try {
      await this.core.createNamespacedEvent({ namespace: g.namespace, body });
      this.metrics?.kubernetesEvents.inc({ result: "created" });
      return true;
    } catch (error) {
      if (statusOf(error) === 409) return false; // exists: patch it instead
      throw error;
    }
  }

  /** False when the Event is gone (expired: create it again). */
  private async patch(g: Group, count: number): Promise<boolean> {
    const body = groupEventPatch(g, count);
    try {
      await this.core.patchNamespacedEvent({ name: g.name, namespace: g.namespace, body });
      this.metrics?.kubernetesEvents.inc({ result: "patched" });
      return true;
    } catch (error) {
      if (statusOf(error) === 404) return false;
      throw error;
    }
  }
}
