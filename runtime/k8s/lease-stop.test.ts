/**
 * Stopping an elector whose role takes time to stop (the pods role stops its informers, the loader
 * closes the kernel program): while onStoppedLeading runs, the election loop must not take the
 * Lease again and start a role that nothing would stop. Against a real kube-apiserver
 * (test/cluster), where the loop's renewal can be in flight when stop() begins.
 */
import { CoordinationV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RealApi, startRealApi } from "../../test/cluster/real-api.ts";
import { waitFor } from "../../test/cluster/testing.ts";
import { createLogger } from "../log.ts";
import { createKubeClients } from "./kube-client.ts";
import { LeaderElector } from "./lease.ts";

const quiet = createLogger({}, { level: "error", sink: () => {} });

let api: RealApi;
beforeAll(async () => {
  api = await startRealApi({ controllerManager: false });
}, 180_000);
afterAll(async () => {
  await api?.stop();
});

describe("LeaderElector.stop", () => {
  it("does not lead again while its role is stopping, and leaves the Lease released", async () => {
    let started = 0;
    let stopped = 0;
    const elector = new LeaderElector({
      coordination: createKubeClients({ kubeConfig: api.kubeConfig() }).coordination,
      namespace: "default",
      name: "slow-stop",
      identity: "node-a/agent-a",
      leaseDurationMs: 1500,
      renewDeadlineMs: 1000,
      retryPeriodMs: 100,
      renewPeriodMs: 100,
      logger: quiet,
      onStartedLeading: () => {
        started++;
      },
      // Longer than several renew periods: the loop wakes meanwhile.
      onStoppedLeading: async () => {
        stopped++;
        await new Promise((r) => setTimeout(r, 1000));
      },
    });
    elector.start();
    await waitFor(() => elector.isLeader(), { timeoutMs: 10_000, what: "the first term" });
    await elector.stop();
    expect(elector.isLeader()).toBe(false);
    expect({ started, stopped }).toEqual({ started: 1, stopped: 1 });
    const lease = await api
      .kubeConfig()
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: "default", name: "slow-stop" });
    expect(lease.spec?.holderIdentity).toBe("");
    // Nothing runs on after stop(): no write to the Lease later.
    await new Promise((r) => setTimeout(r, 500));
    const after = await api
      .kubeConfig()
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: "default", name: "slow-stop" });
    expect(after.metadata?.resourceVersion).toBe(lease.metadata?.resourceVersion);
  });
});
