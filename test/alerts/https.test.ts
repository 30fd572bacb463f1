/**
 * Delivery over HTTPS to a receiver with a certificate made at test time (openssl): trusted
 * through the dispatcher's `ca` option it works as over HTTP; untrusted, every attempt fails
 * with class "tls" and the alert waits in the queue instead of being lost.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { Alert } from "../../api/alert.ts";
import { type AlertPipelineConfig, createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { type Pem, selfSignedCertificate } from "../fixtures/self-signed.ts";
import { assertValidAlert, captureLogger, counterValue, makeEvent, makeSource, sleep } from "./fixtures.ts";
import { startReceiver } from "./receiver.ts";

let pem: Pem;
beforeAll(() => {
  pem = selfSignedCertificate();
});

/** A TLS receiver with the test certificate and a pipeline delivering to it with `delivery(receiverUrl)`. */
async function start(delivery: (url: string) => AlertPipelineConfig["delivery"]) {
  const receiver = await startReceiver(0, pem);
  const metrics = createHiveMetrics({ processMetrics: false });
  const pipeline = await createAlertPipeline({
    logger: captureLogger().logger,
    metrics,
    lines: false,
    delivery: delivery(receiver.url),
  });
  return { receiver, metrics, pipeline };
}

describe("alert delivery over HTTPS", () => {
  it("delivers to a receiver whose certificate the configured CA vouches for", async () => {
    const { receiver, pipeline } = await start((url) => ({
      ca: pem.cert,
      destinations: [{ urlPrefix: url, hmacSecrets: ["k"] }],
    }));
    try {
      const alerts = [1, 2, 3].map(
        (i) => pipeline.handle(makeEvent(i), makeSource("trap-tls", receiver.url)) as Alert,
      );
      expect(await pipeline.drain(10_000)).toBe(true);
      expect(receiver.accepted.map((r) => r.id)).toEqual(alerts.map((a) => a.id));
      for (const r of receiver.accepted) {
        assertValidAlert(JSON.parse(r.body));
        expect(r.headers["hive-signature"]).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      }
      expect(receiver.connections).toBe(1); // one TLS handshake, then keep-alive
    } finally {
      await pipeline.close();
      await receiver.close();
    }
  });

  it("keeps retrying, classed as tls, when the receiver's certificate is not trusted", async () => {
    const { receiver, pipeline, metrics } = await start(() => ({ backoffBaseMs: 20, backoffMaxMs: 50 }));
    try {
      pipeline.handle(makeEvent(1), makeSource("trap-tls", receiver.url));
      await sleep(300);
      expect(await counterValue(metrics.deliveryFailures, { class: "tls" })).toBeGreaterThan(1);
      expect(await counterValue(metrics.alertsDropped)).toBe(0);
      expect(pipeline.pending()).toBe(1);
      expect(receiver.accepted).toEqual([]);
    } finally {
      await pipeline.close();
      await receiver.close();
    }
  });
});
