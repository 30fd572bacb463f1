/**
 * Where a tenant's alerts may go, through real HTTP: a trap callback of a policy outside the
 * monitor's namespace is contacted only when the monitor allows it (under a tenantCallbacks
 * prefix, once normalised); otherwise the alert goes to the monitor's callback, the tenant's
 * URL sees no request at all, and the refusal is counted.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { captureLogger, counterValue, makeEvent, makeSource } from "./fixtures.ts";
import { startReceiver } from "./receiver.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("tenant callbacks", () => {
  it("are contacted only under the monitor's allowed prefixes; the platform's policies may name any", async () => {
    const monitor = await startReceiver();
    const allowed = await startReceiver();
    const internal = await startReceiver(); // e.g. a cluster-internal service a tenant must not reach
    for (const r of [monitor, allowed, internal]) cleanups.push(() => r.close());
    const { logger, lines } = captureLogger();
    const metrics = createHiveMetrics({ processMetrics: false });
    const pipeline = await createAlertPipeline({
      logger,
      metrics,
      defaultCallback: monitor.url,
      tenancy: { platformNamespace: "hive-system", callbacks: [`${allowed.url}`] },
      lines: false,
    });
    cleanups.push(() => pipeline.close());

    const tenant = (callback: string) => makeSource("t-tenant", callback, { policyNamespace: "team-a" });
    pipeline.handle(makeEvent(1), tenant(`${internal.url}/steal`));
    pipeline.handle(makeEvent(2), tenant(`${allowed.url}/team-a`));
    // Reads as under the allowed prefix, but leaves it once the URL is normalised.
    pipeline.handle(makeEvent(4), tenant(`${allowed.url}/team-a/%2e%2e/%2e%2e/admin`));
    pipeline.handle(
      makeEvent(3),
      makeSource("t-platform", `${internal.url}/ops`, { policyNamespace: "hive-system" }),
    );
    expect(await pipeline.drain(10_000)).toBe(true);

    const pids = (r: typeof monitor) =>
      r.accepted.map((a) => (JSON.parse(a.body) as { process: { pid: number } }).process.pid);
    // The refused tenant callbacks' alerts, redirected.
    expect(pids(monitor).sort()).toEqual([4001, 4004]);
    expect(pids(allowed)).toEqual([4002]);
    expect(pids(internal)).toEqual([4003]); // the platform's policy only: never the tenant's
    expect(internal.requests).toBe(1);
    expect(await counterValue(metrics.tenantCallbacksRefused, { policy_namespace: "team-a" })).toBe(2);
    expect(
      lines.filter((l) => l.msg === "tenant callback not allowed; alerts go to the monitor's callback"),
    ).toHaveLength(2);
  });
});
