/**
 * Which alert is sent next, and when. A destination is a callback URL's origin
 * (scheme://host:port); each has its own keep-alive connection pool of `concurrency`
 * sockets and never has more requests in flight than that. Its trap lanes (delivery-queue.ts)
 * take turns; a lane waits out its backoff on a timer, and the whole destination pauses
 * (`notBefore`) when a receiver's Retry-After asks for it. Lanes waiting out a backoff can
 * be woken early: the receiver answered again, or the credentials changed.
 */
import http from "node:http";
import https from "node:https";
import tls from "node:tls";
import { type Item, ItemList, type Lane, laneHead, newLane, trimLane } from "./delivery-queue.ts";

export interface Destination {
  origin: string;
  agent: http.Agent;
  inFlight: number;
  notBefore: number;
  wakeTimer: NodeJS.Timeout | undefined;
  lanes: Map<string, Lane>;
  ready: Lane[];
  failing: boolean;
  authFailing: boolean;
  /** Undelivered items and their bytes (the quota). */
  items: ItemList;
  pendingCount: number;
  pendingBytes: number;
}

export interface SchedulerOptions {
  /** Concurrent requests (and pooled sockets) per destination. */
  concurrency: number;
  /** Extra CA certificates (PEM) trusted for https callbacks, besides the system's. */
  ca?: string | Buffer | (string | Buffer)[] | undefined;
  /** Makes one attempt to deliver the lane's head item (the lane is busy until it ends). */
  send: (dest: Destination, lane: Lane, item: Item) => Promise<void>;
}

export class DeliveryScheduler {
  readonly destinations = new Map<string, Destination>();
  private readonly inFlightRequests = new Set<Promise<void>>();
  private closed = false;
  private readonly concurrency: number;
  private readonly extraCa: (string | Buffer)[] | undefined;
  private readonly send: SchedulerOptions["send"];

  constructor(options: SchedulerOptions) {
    this.concurrency = options.concurrency;
    this.send = options.send;
    // Node's `ca` option replaces the default trust store: add the system's roots to what is given.
    this.extraCa = options.ca
      ? [...tls.rootCertificates, ...(Array.isArray(options.ca) ? options.ca : [options.ca])]
      : undefined;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  destinationFor(origin: string, protocol: string): Destination {
    let d = this.destinations.get(origin);
    if (d) return d;
    const agentOptions = {
      keepAlive: true,
      maxSockets: this.concurrency,
      maxFreeSockets: this.concurrency,
      scheduling: "fifo" as const,
    };
    d = {
      origin,
      agent:
        protocol === "https:"
          ? new https.Agent({ ...agentOptions, ...(this.extraCa ? { ca: this.extraCa } : {}) })
          : new http.Agent(agentOptions),
      inFlight: 0,
      notBefore: 0,
      wakeTimer: undefined,
      lanes: new Map(),
      ready: [],
      failing: false,
      authFailing: false,
      items: new ItemList(),
      pendingCount: 0,
      pendingBytes: 0,
    };
    this.destinations.set(origin, d);
    return d;
  }

  /** Puts an item at the end of its trap's lane and sends what may go now. */
  add(dest: Destination, item: Item): void {
    let lane = dest.lanes.get(item.rec.trapId);
    if (!lane) {
      lane = newLane();
      dest.lanes.set(item.rec.trapId, lane);
    }
    trimLane(lane);
    lane.items.push(item);
    this.makeReady(dest, lane);
    this.pump(dest);
  }

  /** The lane takes its turn again when it has an item to send and none in flight. */
  makeReady(dest: Destination, lane: Lane): void {
    if (lane.busy || lane.queued || !laneHead(lane)) return;
    lane.queued = true;
    dest.ready.push(lane);
  }

  /** Sends ready lanes' heads up to the concurrency (after the destination's pause, if any). */
  pump(dest: Destination): void {
    if (this.closed) return;
    const now = Date.now();
    if (dest.notBefore > now) {
      if (!dest.wakeTimer && dest.ready.length > 0) {
        dest.wakeTimer = setTimeout(() => {
          dest.wakeTimer = undefined;
          this.pump(dest);
        }, dest.notBefore - now);
      }
      return;
    }
    while (dest.inFlight < this.concurrency && dest.ready.length > 0) {
      const lane = dest.ready.shift() as Lane;
      lane.queued = false;
      const item = laneHead(lane);
      if (!item || lane.busy) continue;
      lane.busy = true;
      dest.inFlight++;
      const p = this.send(dest, lane, item);
      this.inFlightRequests.add(p);
      void p.finally(() => this.inFlightRequests.delete(p));
    }
  }

  /** The lane's wait is over: it may send again. */
  private release(dest: Destination, lane: Lane): void {
    lane.timer = undefined;
    lane.busy = false;
    this.makeReady(dest, lane);
  }

  /** The lane sends again after `delayMs`; `wholeDestination`: the receiver asked all of it to wait. */
  backoff(dest: Destination, lane: Lane, delayMs: number, wholeDestination: boolean): void {
    if (wholeDestination) dest.notBefore = Math.max(dest.notBefore, Date.now() + delayMs);
    lane.timer = setTimeout(() => {
      this.release(dest, lane);
      this.pump(dest);
    }, delayMs);
  }

  /** Lanes waiting out a backoff are sent now (the receiver answered again, or credentials changed). */
  wake(dest: Destination): void {
    for (const lane of dest.lanes.values()) {
      if (!lane.timer) continue;
      clearTimeout(lane.timer);
      this.release(dest, lane);
    }
    this.pump(dest);
  }

  /** Stops sending and waits for the requests in flight to end. */
  async close(): Promise<void> {
    this.closed = true;
    for (const dest of this.destinations.values()) {
      clearTimeout(dest.wakeTimer);
      for (const lane of dest.lanes.values()) clearTimeout(lane.timer);
      dest.agent.destroy();
    }
    await Promise.allSettled([...this.inFlightRequests]);
  }
}
