/**
 * callback.format end to end: from the component's option, through the agent's flags and its
 * destinations, to the body a real receiver on 127.0.0.1 gets, checked against the published
 * shape of that format (published-shapes.ts), and what happens when a receiver refuses the body.
 */
import type http from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import type { Alert } from "../../api/alert.ts";
import { LABEL_TRAP_ID } from "../../api/meta.ts";
import { agentArgs } from "../../component/builders/daemonset.ts";
import { resolveConfig } from "../../component/config.ts";
import { callbackDestinations } from "../../runtime/agent/callback-destinations.ts";
import { parseAgentConfig } from "../../runtime/agent/config.ts";
import { alertSourceFromHiveData } from "../../runtime/alerts/alert-source.ts";
import type { DestinationOptions } from "../../runtime/alerts/delivery/dispatcher.ts";
import { createKubeClients } from "../../runtime/k8s/kube-client.ts";
import {
  assertValidAlert,
  counterValue,
  KERNEL_ID,
  makeEvent,
  makeSource,
  testPipeline,
} from "./fixtures.ts";
import { assertShape, CloudEventSchema, SlackMessageSchema } from "./published-shapes.ts";
import { type FaultAction, startReceiver } from "./receiver.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function pipelineWith(destinations: DestinationOptions[]) {
  const { pipeline, metrics, logs } = await testPipeline({
    delivery: { destinations, backoffBaseMs: 20, backoffMaxMs: 100 },
  });
  cleanups.push(() => pipeline.close());
  return { pipeline, metrics, logs };
}

const hintOf = (line: Record<string, unknown> | undefined) =>
  (line?.error as { hint?: string } | undefined)?.hint;

/** Answers as a Slack incoming webhook does: 400 `invalid_payload` to a body that is not a message. */
function slackWebhook(_n: number, _req: http.IncomingMessage, body: string): FaultAction {
  let text: unknown;
  try {
    text = (JSON.parse(body) as { text?: unknown }).text;
  } catch {
    return { kind: "status", status: 400, body: "invalid_payload" };
  }
  return typeof text === "string" && text !== ""
    ? { kind: "ok" }
    : { kind: "status", status: 400, body: "invalid_payload" };
}

const HIVE_DATA = {
  metadata: {
    labels: { [LABEL_TRAP_ID]: "t-1" },
    annotations: { pod_name: "web-7d9c-x", namespace: "shop", container_name: "app", container_id: "c://1" },
  },
  spec: {
    "inode-no": "131073",
    "kernel-id": KERNEL_ID,
    device: { major: 259, minor: 1 },
    accesses: ["read" as const],
    pod: { workload: { kind: "Deployment", name: "web" }, image: "registry.example.com/web:1" },
  },
};

describe("callback formats", () => {
  it("turns CloudEvents on from the component's callback.format, and carries clusterName into every alert", async () => {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const resolved = resolveConfig({
      image: "hive:test",
      clusterName: "prod-eu-1",
      callback: { url: receiver.url, format: "cloudevents" },
    });
    if (!resolved.ok) throw new Error(JSON.stringify(resolved.problems));
    // The DaemonSet's arguments, and the URL as the kubelet gives it from the callback Secret.
    const config = parseAgentConfig(agentArgs(resolved.config).slice(1), {
      NODE_NAME: "node-a",
      HIVE_CALLBACK: receiver.url,
    });
    expect(config).toMatchObject({ callbackFormat: "cloudevents", clusterName: "prod-eu-1" });
    const clients = createKubeClients({ url: "http://127.0.0.1:1" }); // no Secret to read: never contacted
    const { pipeline } = await pipelineWith(await callbackDestinations(config, clients));
    const live = {
      trapId: "t-1",
      policy: { namespace: "hive-system", name: "shadow" },
      trap: { path: "/etc/shadow", severity: "critical" as const, callback: receiver.url },
    };
    const source = alertSourceFromHiveData(HIVE_DATA, live, {
      nodeName: "node-a",
      ...(config.clusterName ? { clusterName: config.clusterName } : {}),
    });
    const alert = pipeline.handle(makeEvent(1), source) as Alert;
    expect(await pipeline.drain(10_000)).toBe(true);

    const [got] = receiver.accepted;
    expect(got?.headers["content-type"]).toBe("application/cloudevents+json; charset=utf-8");
    const event = JSON.parse(got?.body ?? "{}");
    assertShape(CloudEventSchema, event, "the CloudEvent");
    expect(event).toMatchObject({ id: alert.id, time: alert.timestamp, subject: "/etc/shadow" });
    assertValidAlert(event.data);
    expect(event.data).toMatchObject({
      cluster: { name: "prod-eu-1" },
      severity: "critical",
      pod: {
        workload: { kind: "Deployment", name: "web" },
        container: { image: "registry.example.com/web:1" },
      },
    });
  });

  it("applies the format to a callback written without a path, and to the other URLs of its origin", async () => {
    const clients = createKubeClients({ url: "http://127.0.0.1:1" });
    const base = { namespace: "hive-system", callbackFormat: "alertmanager" as const };
    expect(await callbackDestinations({ ...base, callback: "http://am.monitoring:9093" }, clients)).toEqual([
      { urlPrefix: "http://am.monitoring:9093", format: "alertmanager" },
      { urlPrefix: "http://am.monitoring:9093/", format: "alertmanager" },
    ]);
    expect(
      await callbackDestinations(
        { ...base, callbackFormat: "json", callback: "http://am.monitoring:9093" },
        clients,
      ),
    ).toEqual([]);
  });

  it("posts a Slack incoming-webhook message that a Slack-style receiver takes, with the container's text escaped", async () => {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    receiver.fault = slackWebhook;
    const { pipeline, metrics } = await pipelineWith([{ urlPrefix: receiver.url, format: "slack" }]);
    // What a container controls: a path of the trap is the policy's, but the executable is the container's.
    const event = makeEvent(1, {
      process: { ...makeEvent(1).process, exe: { exe: "/tmp/<!channel> & `x`\n", source: "exec" } },
    });
    const alert = pipeline.handle(
      event,
      makeSource("t-s", receiver.url, {
        severity: "critical",
        clusterName: "prod",
        trapLabels: { team: "payments" },
      }),
    ) as Alert;
    expect(await pipeline.drain(10_000)).toBe(true);
    expect(await counterValue(metrics.alertsDelivered)).toBe(1);
    const message = JSON.parse(receiver.accepted[0]?.body ?? "{}");
    assertShape(SlackMessageSchema, message, "the Slack message");
    expect(message.blocks.length).toBeGreaterThan(0);
    const all = JSON.stringify(message);
    // No mention, link or code-span break survives; the text is all there, escaped.
    expect(all).not.toContain("<!channel>");
    expect(message.text).toContain("&lt;!channel&gt; &amp; 'x'\\n");
    for (const piece of [
      "[critical]",
      "/etc/shadow",
      "default/nginx-7d9c",
      "prod",
      "team=`payments`",
      alert.id,
    ])
      expect(message.text).toContain(piece);
  });

  it("logs a body refusal with the receiver's answer and the callback.format hint, and counts the alert dropped", async () => {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    receiver.fault = slackWebhook;
    const { pipeline, metrics, logs } = await pipelineWith([]);
    pipeline.handle(makeEvent(1), makeSource("t-j", receiver.url));
    expect(await pipeline.drain(10_000)).toBe(true);
    expect(receiver.requests).toBe(1); // not retried: every attempt would be refused alike
    expect(await counterValue(metrics.alertsDropped, { reason: "permanent_failure" })).toBe(1);
    const line = logs.find((l) => (l.error as { code?: string } | undefined)?.code === "DeliveryFailed");
    expect(line).toMatchObject({
      level: "error",
      answer: "invalid_payload",
      format: "json",
      reason: "permanent_failure",
    });
    expect(hintOf(line)).toContain('callback.format "slack"');
  });

  it("gives the format hint only for answers that say the body was not understood", async () => {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const long = "x".repeat(10_000);
    receiver.fault = (n) =>
      n === 1 ? { kind: "status", status: 410, body: "gone" } : { kind: "status", status: 415, body: long };
    const { pipeline, logs } = await pipelineWith([]);
    pipeline.handle(makeEvent(1), makeSource("t-g", receiver.url));
    pipeline.handle(makeEvent(2), makeSource("t-g", receiver.url));
    expect(await pipeline.drain(10_000)).toBe(true);
    const [gone, unsupported] = logs.filter(
      (l) => (l.error as { code?: string } | undefined)?.code === "DeliveryFailed",
    );
    expect(gone?.answer).toBe("gone");
    expect(hintOf(gone)).not.toContain("callback.format");
    // 415 Unsupported Media Type: another format may be what it takes; the answer is cut short.
    expect(hintOf(unsupported)).toContain("set callback.format to one of cloudevents");
    expect(String(unsupported?.answer).length).toBeLessThanOrEqual(513);
  });
});
