/**
 * Standalone mode follows the containers of the local containerd as they start and stop:
 * it subscribes to containerd's event service (Events/Subscribe, every namespace) and reports
 * each task start or stop of a container as a change, so that standalone.ts re-lists and arms
 * the new container's traps at once. What it cannot see, it makes up for by re-listing:
 *  - the stream ends (containerd restarts, the socket goes away): resubscribe with capped
 *    backoff, then ask for a full re-list, since events were missed meanwhile;
 *  - the runtime has no event service (UNIMPLEMENTED: a CRI-only runtime such as CRI-O):
 *    re-list periodically instead, said once in the log.
 * Events are only triggers: what is armed always comes from a fresh list (containers,
 * tasks, PIDs), never from an event's payload alone.
 *
 * The gRPC subset (Events/Subscribe, Envelope, the task and container events) is defined once
 * in runtime/discover/containerd-api.ts.
 */
import type * as grpc from "@grpc/grpc-js";
import { type BackoffOptions, backoffDelay } from "../backoff.ts";
import type { RuntimeEnvelope } from "../discover/containerd-api.ts";
import type { Logger } from "../log.ts";

/**
 * The topics that change which containers have a running task, or what selects one (its labels:
 * `/containers/update`), in containerd's api/events.
 */
export const FOLLOWED_TOPICS = [
  "/tasks/start",
  "/tasks/exit",
  "/tasks/delete",
  "/containers/update",
  "/containers/delete",
] as const;

/**
 * Re-list period when the runtime has no event service. A re-list is one gRPC call per
 * namespace and two per namespace with containers, and re-plans only when the containers
 * differ, so it is cheap; 2 s keeps the window in which a new container is unwatched well
 * below the seconds a container takes to start its work (the kubelet re-lists every 1 s).
 */
export const POLL_INTERVAL_MS = 2000;

/** Resubscription backoff: containerd restarts in about a second; a long outage is retried every 10 s. */
export const RESUBSCRIBE_BACKOFF: BackoffOptions = { baseMs: 250, maxMs: 10_000 };

/** A stream that stayed open this long was healthy: the next loss starts the backoff over. */
const HEALTHY_STREAM_MS = 5000;

/** One reason to look at the containers again. */
export interface ContainerChange {
  reason: string;
  /** A task start: its container (`namespace/id`) and when containerd started it (ms since the epoch). */
  started?: { container: string; atMs: number };
}

/** How standalone mode learns of container starts and stops (shown by `hive status`). */
export interface ContainerFollowState {
  /** "events": containerd's event stream; "polling": periodic re-list (no event service). */
  mode: "events" | "polling";
  /** events: the stream is open; polling: always true. */
  connected: boolean;
  /** When `connected` (or `mode`) last changed. */
  since: string;
  /** Times the stream was opened again after it ended. */
  resubscribes: number;
  pollIntervalMs?: number;
  /** Why the stream is not connected, while it is not. */
  lastError?: string;
}

export interface ContainerEventSource {
  /** A client of containerd's Events service (containerd-api.ts connectRuntimeService "events"). */
  client: grpc.Client;
  subscribe(filters: readonly string[]): grpc.ClientReadableStream<RuntimeEnvelope>;
  /** The change an envelope means, undefined when it changes no container's task (an exec's exit). */
  interpret(envelope: RuntimeEnvelope): ContainerChange | undefined;
}

export interface FollowOptions {
  source: ContainerEventSource;
  logger: Logger;
  onChange(change: ContainerChange): void;
  onState?(state: ContainerFollowState): void;
  backoff?: BackoffOptions;
  pollIntervalMs?: number;
  /** How long one connection attempt may take before it counts as failed. */
  connectTimeoutMs?: number;
}

export interface ContainerFollower {
  state(): ContainerFollowState;
  close(): void;
}

/** gRPC status codes (numeric, so that this module loads no gRPC by itself). */
const UNIMPLEMENTED = 12;
const CANCELLED = 1;

/** A follower's state: what it reports, and the stream, timers and retries it holds. */
interface Following {
  readonly options: FollowOptions;
  readonly backoff: BackoffOptions;
  readonly pollIntervalMs: number;
  state: ContainerFollowState;
  closed: boolean;
  stream: grpc.ClientReadableStream<RuntimeEnvelope> | undefined;
  retryTimer: NodeJS.Timeout | undefined;
  pollTimer: NodeJS.Timeout | undefined;
  /** Connection attempts since the stream was last healthy (for the backoff). */
  attempt: number;
  subscribedOnce: boolean;
  /** When the stream was lost, while it is. */
  lostAtMs: number | undefined;
}

export function followContainers(options: FollowOptions): ContainerFollower {
  const f: Following = {
    options,
    backoff: options.backoff ?? RESUBSCRIBE_BACKOFF,
    pollIntervalMs: options.pollIntervalMs ?? POLL_INTERVAL_MS,
    state: { mode: "events", connected: false, since: new Date().toISOString(), resubscribes: 0 },
    closed: false,
    stream: undefined,
    retryTimer: undefined,
    pollTimer: undefined,
    attempt: 0,
    subscribedOnce: false,
    lostAtMs: undefined,
  };
  connect(f);
  return {
    state: () => f.state,
    close() {
      f.closed = true;
      if (f.retryTimer !== undefined) clearTimeout(f.retryTimer);
      if (f.pollTimer !== undefined) clearInterval(f.pollTimer);
      f.stream?.cancel();
    },
  };
}

/** The state after `next`: `since` moves when `connected` or `mode` changes; a connected one has no error. */
export function nextFollowState(
  state: ContainerFollowState,
  next: Partial<ContainerFollowState>,
  now: string,
): ContainerFollowState {
  const changed = next.connected !== undefined && next.connected !== state.connected;
  const merged = { ...state, ...next, ...(changed || next.mode ? { since: now } : {}) };
  if (merged.connected) delete merged.lastError;
  return merged;
}

function setState(f: Following, next: Partial<ContainerFollowState>): void {
  f.state = nextFollowState(f.state, next, new Date().toISOString());
  f.options.onState?.(f.state);
}

function connect(f: Following): void {
  f.retryTimer = undefined;
  if (f.closed) return;
  // Subscribe only on a ready channel: the call would otherwise wait for containerd silently.
  f.options.source.client.waitForReady(Date.now() + (f.options.connectTimeoutMs ?? 3000), (error) => {
    if (f.closed) return;
    if (error) return retry(f, error.message);
    open(f);
  });
}

function retry(f: Following, why: string): void {
  if (f.closed) return;
  const { logger } = f.options;
  f.attempt++;
  const delayMs = Math.round(backoffDelay(f.attempt, f.backoff));
  if (f.lostAtMs === undefined) {
    f.lostAtMs = Date.now();
    logger.warn("container event stream lost: resubscribing", { error: why, retryInMs: delayMs });
  } else {
    logger.debug("container event stream still unavailable", {
      error: why,
      attempt: f.attempt,
      retryInMs: delayMs,
    });
  }
  setState(f, { connected: false, lastError: why });
  f.retryTimer = setTimeout(() => connect(f), delayMs);
}

function poll(f: Following): void {
  const { logger } = f.options;
  const { pollIntervalMs } = f;
  // Said once: from now on the containers are re-listed on a timer.
  logger.warn("the container runtime has no event service: re-listing containers periodically", {
    intervalMs: pollIntervalMs,
    hint: "containerd serves events; a CRI-only runtime (CRI-O) does not. A container is armed within one interval of its start",
  });
  setState(f, { mode: "polling", connected: true, pollIntervalMs });
  f.pollTimer = setInterval(() => f.options.onChange({ reason: "periodic re-list" }), pollIntervalMs);
  f.pollTimer.unref();
}

/** Subscribes, turns each envelope into a change, and on the stream's end resubscribes or polls. */
function open(f: Following): void {
  const { source, logger } = f.options;
  const opened = source.subscribe(FOLLOWED_TOPICS.map((topic) => `topic=="${topic}"`));
  f.stream = opened;
  const openedAtMs = Date.now();
  let ended = false;
  const end = (code: number, details: string) => {
    if (ended) return;
    ended = true;
    if (f.stream === opened) f.stream = undefined;
    if (f.closed || code === CANCELLED) return;
    if (code === UNIMPLEMENTED) return poll(f);
    if (Date.now() - openedAtMs >= HEALTHY_STREAM_MS) f.attempt = 0;
    retry(f, details || `the event stream ended (status ${code})`);
  };
  opened.on("data", (envelope: RuntimeEnvelope) => {
    const change = changeOf(source, envelope, logger);
    if (change) f.options.onChange(change);
  });
  // grpc-js emits `error` for a non-OK status, then `status` in every case.
  opened.on("error", (error: grpc.ServiceError) => end(error.code, error.details || error.message));
  opened.on("status", (status: grpc.StatusObject) => end(status.code, status.details));
  subscribed(f);
}

/** The change an envelope means; one that does not decode still means a container changed. */
function changeOf(
  source: ContainerEventSource,
  envelope: RuntimeEnvelope,
  logger: Logger,
): ContainerChange | undefined {
  try {
    return source.interpret(envelope);
  } catch (error) {
    logger.warn("a container event could not be decoded; re-listing", { topic: envelope.topic, error });
    return { reason: `${envelope.topic} (undecoded)` };
  }
}

/** The stream is open: said, and a re-list asked for, since what happened before it was not seen. */
function subscribed(f: Following): void {
  const { logger } = f.options;
  const resubscribed = f.subscribedOnce;
  f.subscribedOnce = true;
  if (resubscribed) {
    logger.info("container event stream resubscribed; re-listing containers", {
      downMs: f.lostAtMs === undefined ? 0 : Date.now() - f.lostAtMs,
      resubscribes: f.state.resubscribes + 1,
    });
    setState(f, { connected: true, resubscribes: f.state.resubscribes + 1 });
  } else {
    logger.info("following container starts and stops on containerd's event stream", {
      topics: FOLLOWED_TOPICS,
    });
    setState(f, { connected: true });
  }
  f.lostAtMs = undefined;
  // Whatever happened before this subscription (or while the stream was down) was not seen.
  f.options.onChange({ reason: resubscribed ? "event stream resubscribed" : "event stream subscribed" });
}
