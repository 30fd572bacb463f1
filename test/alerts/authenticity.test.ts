/**
 * What a receiver sees beyond the alert itself: the HMAC signature (verified here with
 * node:crypto directly, as a receiver would, not with Hive's signer), extra headers that
 * reach only the URLs they are configured for, CloudEvents structured mode, and the
 * per-trap rate limit's `suppressed` count.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import type { Alert } from "../../api/alert.ts";
import {
  type AlertPipeline,
  type AlertPipelineConfig,
  createAlertPipeline,
} from "../../runtime/alerts/pipeline.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { assertValidAlert, captureLogger, counterValue, makeEvent, makeSource } from "./fixtures.ts";
import { type Receiver, startReceiver } from "./receiver.ts";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function receiver(): Promise<Receiver> {
  const r = await startReceiver();
  cleanups.push(() => r.close());
  return r;
}

/** A pipeline that delivers only (no stdout lines, no procfs), closed after the test. */
async function deliveryPipeline(config: Partial<AlertPipelineConfig>): Promise<AlertPipeline> {
  const pipeline = await createAlertPipeline({
    logger: captureLogger().logger,
    metrics: createHiveMetrics({ processMetrics: false }),
    lines: false,
    ...config,
  });
  cleanups.push(() => pipeline.close());
  return pipeline;
}

/** A receiver's verification, written from the documented scheme only. */
function verify(
  header: string | undefined,
  body: string,
  secret: string,
  nowSeconds: number,
  toleranceSeconds = 300,
): boolean {
  if (!header) return false;
  const parts = header.split(",").map((p) => p.split("=", 2) as [string, string]);
  const t = parts.find(([k]) => k === "t")?.[1];
  if (!t || !/^\d+$/.test(t) || Math.abs(nowSeconds - Number(t)) > toleranceSeconds) return false;
  const expected = createHmac("sha256", secret).update(`${t}.${body}`, "utf8").digest();
  return parts
    .filter(([k]) => k === "v1")
    .some(([, v]) => {
      const got = Buffer.from(v, "hex");
      return got.length === expected.length && timingSafeEqual(got, expected);
    });
}

describe("what the receiver gets", () => {
  it("signs every body so that an independent HMAC-SHA256 check verifies it, also across a retry", async () => {
    const r = await receiver();
    r.fault = (n) => (n === 1 ? { kind: "status", status: 503 } : { kind: "ok" });
    const pipeline = await deliveryPipeline({
      delivery: {
        backoffBaseMs: 10,
        destinations: [{ urlPrefix: r.url, hmacSecrets: ["old-secret", "s3cr3t"] }],
      },
    });
    for (let i = 0; i < 5; i++) pipeline.handle(makeEvent(i), makeSource("trap-s", r.url));
    expect(await pipeline.drain(5_000)).toBe(true);
    expect(r.accepted).toHaveLength(5);
    const now = Date.now() / 1000;
    for (const got of r.accepted) {
      const header = got.headers["hive-signature"] as string;
      expect(verify(header, got.body, "s3cr3t", now)).toBe(true);
      expect(verify(header, got.body, "old-secret", now)).toBe(true);
      expect(verify(header, got.body, "wrong", now)).toBe(false);
      expect(verify(header, got.body.replace("cat", "dog"), "s3cr3t", now)).toBe(false);
      expect(verify(header, got.body, "s3cr3t", now + 3600)).toBe(false);
    }
    expect(r.accepted[0]?.headers["hive-delivery-attempt"]).toBe("2");
  });

  it("signs with the new key once the destinations are replaced after a Secret rotation", async () => {
    const r = await receiver();
    const pipeline = await deliveryPipeline({
      delivery: { destinations: [{ urlPrefix: r.url, hmacSecrets: ["first"] }] },
    });
    pipeline.handle(makeEvent(1), makeSource("trap-r", r.url));
    expect(await pipeline.drain(5_000)).toBe(true);
    pipeline.setDestinations([{ urlPrefix: r.url, hmacSecrets: ["second"] }]);
    pipeline.handle(makeEvent(2), makeSource("trap-r", r.url));
    expect(await pipeline.drain(5_000)).toBe(true);
    const now = Date.now() / 1000;
    const [a, b] = r.accepted;
    expect(verify(a?.headers["hive-signature"] as string, a?.body as string, "first", now)).toBe(true);
    expect(verify(b?.headers["hive-signature"] as string, b?.body as string, "second", now)).toBe(true);
    expect(verify(b?.headers["hive-signature"] as string, b?.body as string, "first", now)).toBe(false);
  });

  it("sends secret headers only to the URLs configured for them, and never lets them override Hive's", async () => {
    const trusted = await receiver();
    const other = await receiver();
    const pipeline = await deliveryPipeline({
      delivery: {
        destinations: [
          {
            urlPrefix: `http://127.0.0.1:${trusted.port}`,
            headers: {
              Authorization: "Bearer t0ken",
              "Hive-Alert-Id": "forged",
              "Content-Type": "text/plain",
            },
          },
        ],
      },
    });
    const a = pipeline.handle(makeEvent(1), makeSource("trap-1", trusted.url)) as Alert;
    pipeline.handle(makeEvent(2), makeSource("trap-2", other.url));
    expect(await pipeline.drain(5_000)).toBe(true);
    expect(trusted.accepted[0]?.headers.authorization).toBe("Bearer t0ken");
    expect(trusted.accepted[0]?.headers["hive-alert-id"]).toBe(a.id);
    expect(trusted.accepted[0]?.headers["content-type"]).toBe("application/json");
    expect(other.accepted[0]?.headers.authorization).toBeUndefined();
  });

  it("speaks CloudEvents structured mode with the alert as data", async () => {
    const r = await receiver();
    const pipeline = await deliveryPipeline({
      delivery: { destinations: [{ urlPrefix: r.url, format: "cloudevents" }] },
    });
    const alert = pipeline.handle(makeEvent(1), makeSource("trap-ce", r.url)) as Alert;
    expect(await pipeline.drain(5_000)).toBe(true);
    const got = r.accepted[0];
    expect(got?.headers["content-type"]).toMatch(/^application\/cloudevents\+json/);
    const event = JSON.parse(got?.body as string);
    expect(event).toMatchObject({
      specversion: "1.0",
      id: alert.id,
      type: "com.hive-operator.alert.v1",
      source: "/hive-operator.com/nodes/node-a",
      time: alert.timestamp,
      subject: "/etc/shadow",
      datacontenttype: "application/json",
    });
    assertValidAlert(event.data);
    expect(event.data).toEqual(alert);
  });

  it("rate-limits a hot trap and reports the suppressed count in its next alert", async () => {
    const r = await receiver();
    const metrics = createHiveMetrics({ processMetrics: false });
    let now = 0;
    const pipeline = await deliveryPipeline({
      metrics,
      rateLimit: { perSecond: 1, burst: 3, now: () => now },
    });
    const produced = Array.from({ length: 50 }, (_, i) =>
      pipeline.handle(makeEvent(i), makeSource("hot", r.url)),
    );
    expect(produced.filter(Boolean)).toHaveLength(3);
    expect(pipeline.handle(makeEvent(99), makeSource("cold", r.url))).toBeDefined();
    now += 1000;
    const next = pipeline.handle(makeEvent(51), makeSource("hot", r.url)) as Alert;
    expect(next.suppressed).toBe(47);
    expect(await counterValue(metrics.alertsSuppressed, { trap_id: "hot" })).toBe(47);
    expect(await pipeline.drain(5_000)).toBe(true);
    const delivered = r.accepted.map((x) => JSON.parse(x.body) as Alert).find((x) => x.id === next.id);
    expect(delivered?.suppressed).toBe(47);
  });
});
