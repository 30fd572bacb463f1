/**
 * A Kubernetes Event on the accessed pod for each alert, so `kubectl describe pod` shows
 * "file /etc/shadow read by cat (pid 4242)".
 *
 * Aggregated and rate-limited so a hot file cannot flood the API server: alerts are
 * grouped by (pod, trap); the first of a group creates an Event (count 1 or more), later
 * ones only raise its `count`, `lastTimestamp` and message, written at most once per
 * `flushIntervalMs` per group by a JSON patch. All writes share a token bucket
 * (`writesPerSecond`, `burst`); a group that finds no token stays dirty and is written,
 * with the accumulated count, on a later flush. Nothing here ever blocks or fails an alert.
 *
 * The pieces: the groups in pod-event-groups.ts, what an Event says in pod-event-content.ts,
 * the API writes in pod-event-writer.ts.
 */

import type { Alert } from "../../api/alert.ts";
import type { CoreApi } from "../k8s/kube-apis.ts";
import type { Logger } from "../log.ts";
import type { HiveMetrics } from "../metrics/metrics.ts";
import { EventGroups, instanceId } from "./pod-event-groups.ts";
import { PodEventWriter } from "./pod-event-writer.ts";
import { TokenBucket } from "./token-bucket.ts";

export {
  accessNote,
  EVENT_COMPONENT,
  EVENT_MESSAGE_MAX,
  EVENT_REASON,
  eventMessage,
  REPORTING_CONTROLLER,
} from "./pod-event-content.ts";

export interface PodEventRecorderOptions {
  core: CoreApi;
  nodeName: string;
  logger: Logger;
  metrics?: HiveMetrics;
  /** How often dirty groups are written; default 10 s. The first alert of a group is written on the next tick. */
  flushIntervalMs?: number;
  /** API writes per second for all groups together; default 5. */
  writesPerSecond?: number;
  burst?: number;
  /** Groups remembered (oldest clean ones forgotten first); default 1024. */
  maxGroups?: number;
}

export interface PodEventRecorder {
  /** `podUid` makes the Event show in `kubectl describe pod` (it filters on the pod's UID). */
  record(alert: Alert, podUid?: string): void;
  /** Writes what is pending (subject to the rate limit) and waits for it. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export function createPodEventRecorder(options: PodEventRecorderOptions): PodEventRecorder {
  const recorder = new GroupedEventRecorder(options);
  return {
    record: (alert, podUid) => recorder.record(alert, podUid),
    flush: () => recorder.flush(),
    close: () => recorder.close(),
  };
}

/**
 * Groups alerts (pod-event-groups.ts) and flushes the dirty groups through the token bucket,
 * one flush at a time: on a timer, when a new group appears, and on demand.
 */
class GroupedEventRecorder {
  private readonly groups: EventGroups;
  private readonly writer: PodEventWriter;
  private readonly bucket: TokenBucket;
  private readonly metrics: HiveMetrics | undefined;
  private readonly flushIntervalMs: number;
  private readonly timer: NodeJS.Timeout;
  private running: Promise<void> | undefined;
  private closed = false;

  constructor(options: PodEventRecorderOptions) {
    this.flushIntervalMs = options.flushIntervalMs ?? 10_000;
    this.metrics = options.metrics;
    // Names are unique per agent start so a restarted agent never collides with an old Event.
    this.groups = new EventGroups(options.maxGroups ?? 1024, instanceId(options.nodeName));
    this.bucket = new TokenBucket(options.writesPerSecond ?? 5, options.burst ?? 10);
    this.writer = new PodEventWriter(options);
    this.timer = setInterval(() => void this.kick(), Math.min(this.flushIntervalMs, 1000));
    this.timer.unref();
  }

  record(alert: Alert, podUid: string | undefined): void {
    if (this.closed || !alert.pod) return;
    const g = this.groups.add(alert, alert.pod, podUid);
    if (!g.created) void this.kick();
  }

  async flush(): Promise<void> {
    if (this.running) await this.running;
    await this.kick(true);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    if (this.running) await this.running;
    await this.kick(true);
  }

  /** Starts a flush unless one is running (then that one is waited for). */
  private kick(force = false): Promise<void> {
    if (this.running) return this.running;
    this.running = this.runFlush(force).finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async runFlush(force: boolean): Promise<void> {
    const take = () => this.bucket.take();
    const { due, throttled } = this.groups.due(performance.now(), force, this.flushIntervalMs, take);
    if (throttled) this.metrics?.kubernetesEvents.inc({ result: "throttled" });
    for (const g of due) await this.writer.write(g);
  }
}
