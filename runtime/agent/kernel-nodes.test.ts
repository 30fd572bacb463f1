import { describe, expect, it } from "vitest";
import type { HiveData } from "../../api/data.ts";
import { LABEL_NODE } from "../../api/meta.ts";
import type { WatchEventType } from "../controllers/ports.ts";
import { createLogger } from "../log.ts";
import { guardKernelData } from "./kernel-nodes.ts";
import { forgedKernelHolder, supersededOrForged } from "./loader-election.ts";

const data = (name: string, node: string): HiveData =>
  ({
    apiVersion: "hive-operator.com/v1alpha1",
    kind: "HiveData",
    metadata: { name, namespace: "hive-system", labels: { [LABEL_NODE]: node } },
    spec: { "inode-no": "1", "kernel-id": "k", device: { major: 0, minor: 1 }, accesses: ["read"] },
  }) as HiveData;

const log = createLogger({}, { level: "error" });

describe("a kernel's HiveData from other nodes", () => {
  it("passes the own node's at once, another node's once it reports the kernel, in order, and never a forger's", async () => {
    const kernels: Record<string, boolean> = { "node-2": true, "node-3": false };
    let release: () => void = () => undefined;
    const slow = new Promise<void>((resolve) => {
      release = resolve;
    });
    const seen: string[] = [];
    const sink = guardKernelData(
      "node-1",
      async (node) => {
        await slow;
        return kernels[node] ?? false;
      },
      (type: WatchEventType, d: HiveData) => seen.push(`${type} ${d.metadata.name}`),
      log,
    );
    sink("ADDED", data("b", "node-2"));
    sink("DELETED", data("b", "node-2"));
    sink("ADDED", data("own", "node-1"));
    sink("ADDED", data("forged", "node-3"));
    expect(seen).toEqual(["ADDED own"]);
    release();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(seen).toEqual(["ADDED own", "ADDED b", "DELETED b"]);
  });

  it("withdraws what passed when its node no longer reports the kernel", async () => {
    let genuine = true;
    const seen: string[] = [];
    const sink = guardKernelData(
      "node-1",
      async () => genuine,
      (type, d) => seen.push(`${type} ${d.metadata.name}`),
      log,
    );
    sink("ADDED", data("x", "node-2"));
    await new Promise((resolve) => setTimeout(resolve, 5));
    genuine = false;
    sink("MODIFIED", data("x", "node-2"));
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(seen).toEqual(["ADDED x", "DELETED x"]);
  });
});

describe("a kernel Lease's holder", () => {
  it("is forged unless it is an agent identity whose node reports the kernel", async () => {
    const forged = forgedKernelHolder(async (node) => node === "node-1");
    expect(await forged("node-1/hive-agent-abc")).toBe(false);
    expect(await forged("node-2/hive-agent-def")).toBe(true);
    expect(await forged("hive-agent-abc")).toBe(true);
  });
});

describe("a kernel Lease held by another agent", () => {
  it("is taken over at once only from this very node (the node lock proves that agent gone), never from a node whose name merely starts the same", async () => {
    // node-1 is this agent's node; node-10 and node-2 report the same kernel (a shared kernel).
    const notGenuine = supersededOrForged("node-1", async (node) =>
      ["node-1", "node-10", "node-2"].includes(node),
    );
    expect(await notGenuine("node-1/hive-agent-old")).toBe(true);
    expect(await notGenuine("node-10/hive-agent-abc")).toBe(false);
    expect(await notGenuine("node-2/hive-agent-def")).toBe(false);
    // A holder that is no agent of a node reporting the kernel stays forged.
    expect(await notGenuine("node-3/hive-agent-x")).toBe(true);
    expect(await notGenuine("node-1")).toBe(true);
  });
});
