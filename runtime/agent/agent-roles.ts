/**
 * The machinery every role of the agent shares: a role runs while this agent leads it (its
 * controller and informers made when leadership starts, stopped when it ends), and one policy
 * watch per node is shared by discover and every running role.
 */
import type { HivePolicy } from "../../api/policy.ts";
import { type FeedOptions, policyFeed } from "../controllers/feeds.ts";
import type { LoaderController } from "../controllers/loader.ts";
import type { PodsController } from "../controllers/pods.ts";
import type { WatchEventType } from "../controllers/ports.ts";
import type { InformerStats } from "../k8s/informer.ts";
import type { LeaderElectionOptions } from "../k8s/lease.ts";
import type { RoleElector } from "./node-lock.ts";

/** What the agent needs of any informer, whatever its object type. */
export interface RunningInformer {
  start(): Promise<void>;
  stop(): Promise<void>;
  readonly stats: InformerStats;
}

/** The controllers of the roles this node leads now. */
export interface Leading {
  loader?: LoaderController | undefined;
  pods?: PodsController | undefined;
}

export type Leadership = Pick<LeaderElectionOptions, "onStartedLeading" | "onStoppedLeading">;

/** A role's term: its controller, the informers feeding it, and what else to close when it ends. */
export type RoleTerm<K extends keyof Leading> = {
  controller: NonNullable<Leading[K]>;
  informers: RunningInformer[];
  close?: () => Promise<void>;
};

/** Starts a role's term; undefined: none this term (the role's cause is reported elsewhere). */
export type RoleStart<K extends keyof Leading> = (signal: AbortSignal) => Promise<RoleTerm<K> | undefined>;

export interface RoleRunner {
  readonly leading: Leading;
  /** Runs `role` while `elect`'s elector says this node leads it. */
  lead<K extends keyof Leading>(role: K, elect: (l: Leadership) => RoleElector, start: RoleStart<K>): void;
  startAll(): void;
  stopAll(options: { release?: boolean }): Promise<void>;
}

export function createRoleRunner(): RoleRunner {
  const leading: Leading = {};
  const electors: RoleElector[] = [];
  return {
    leading,
    lead(role, elect, start) {
      let stopRole: (() => Promise<void>) | undefined;
      electors.push(
        elect({
          onStartedLeading: async (signal) => {
            const started = await start(signal);
            if (!started) return;
            const { controller, informers, close } = started;
            stopRole = async () => {
              // The kernel first: the ring drain's last batch reaches the listeners while the
              // controller still routes events (stopped first, it would drop them as unmatched).
              await close?.();
              controller.stop();
              await Promise.all(informers.map((i) => i.stop()));
              if (leading[role] === controller) leading[role] = undefined;
            };
            if (signal.aborted) return;
            leading[role] = controller;
            await Promise.all(informers.map((i) => i.start()));
            if (!signal.aborted) controller.markSynced();
          },
          onStoppedLeading: async () => {
            const stop = stopRole;
            stopRole = undefined;
            await stop?.();
          },
        }),
      );
    },
    startAll() {
      for (const e of electors) e.start();
    },
    async stopAll(options) {
      await Promise.all(electors.map((e) => e.stop(options)));
    },
  };
}

type PolicySink = (type: WatchEventType, policy: HivePolicy) => void;

export interface SharedPolicies {
  /** The one watch (discover's; started with discover's informers). */
  readonly informer: RunningInformer;
  /** A role's view of it: replays what is listed, then follows, until stopped. */
  subscribe(sink: PolicySink): RunningInformer;
}

/** One policy watch per node: `first` (discover) always, and every role while it runs. */
export function sharedPolicyFeed(first: PolicySink, feedOptions: FeedOptions): SharedPolicies {
  const sinks = new Set<PolicySink>();
  const informer = policyFeed((t, p) => {
    first(t, p);
    for (const sink of sinks) sink(t, p);
  }, feedOptions);
  return {
    informer,
    subscribe(sink) {
      let stopped = false;
      return {
        stats: informer.stats,
        async start() {
          await informer.start();
          if (stopped) return; // the role ended while the shared watch synced
          // Replay and subscribe in one synchronous step: no event can fall between them.
          for (const p of informer.list()) sink("ADDED", p);
          sinks.add(sink);
        },
        async stop() {
          stopped = true;
          sinks.delete(sink);
        },
      };
    },
  };
}
