import type { V1OwnerReference, V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { MAX_POD_LABELS } from "../../api/data.ts";
import { podFacts, workloadOf } from "./pod-facts.ts";

function pod(owner?: Partial<V1OwnerReference>, labels?: Record<string, string>): V1Pod {
  return {
    metadata: {
      name: "web-7d9c5b8f4-x2x8q",
      namespace: "shop",
      ...(labels ? { labels } : {}),
      ...(owner
        ? {
            ownerReferences: [
              { apiVersion: "apps/v1", uid: "u", controller: true, ...owner } as V1OwnerReference,
            ],
          }
        : {}),
    },
    spec: {
      containers: [
        { name: "app", image: "registry.example.com/shop/web:1.4.2" },
        { name: "sidecar", image: "envoyproxy/envoy:v1.31" },
      ],
    },
  };
}

describe("pod facts for alerts", () => {
  it("names the Deployment of a ReplicaSet the Deployment controller made, from its name and the pod-template-hash label", () => {
    expect(
      workloadOf(pod({ kind: "ReplicaSet", name: "web-7d9c5b8f4" }, { "pod-template-hash": "7d9c5b8f4" })),
    ).toEqual({ kind: "Deployment", name: "web" });
    // A Deployment whose name has dashes of its own.
    expect(
      workloadOf(pod({ kind: "ReplicaSet", name: "shop-web-v2-5f6d" }, { "pod-template-hash": "5f6d" })),
    ).toEqual({ kind: "Deployment", name: "shop-web-v2" });
  });

  it("reports a ReplicaSet that does not follow the Deployment convention as itself", () => {
    // No hash label: a ReplicaSet created by hand.
    expect(workloadOf(pod({ kind: "ReplicaSet", name: "web-7d9c5b8f4" }))).toEqual({
      kind: "ReplicaSet",
      name: "web-7d9c5b8f4",
    });
    // A hash label the name does not end with.
    expect(
      workloadOf(pod({ kind: "ReplicaSet", name: "web-abc" }, { "pod-template-hash": "7d9c5b8f4" })),
    ).toEqual({ kind: "ReplicaSet", name: "web-abc" });
    // Not the apps group: someone else's kind called ReplicaSet.
    expect(
      workloadOf(
        pod(
          { apiVersion: "example.com/v1", kind: "ReplicaSet", name: "web-7d9c5b8f4" },
          { "pod-template-hash": "7d9c5b8f4" },
        ),
      ),
    ).toEqual({ kind: "ReplicaSet", name: "web-7d9c5b8f4" });
  });

  it("reports other controllers as they are, and no workload for a bare pod", () => {
    expect(workloadOf(pod({ kind: "StatefulSet", name: "db" }))).toEqual({ kind: "StatefulSet", name: "db" });
    expect(workloadOf(pod({ kind: "DaemonSet", name: "node-exporter" }))).toEqual({
      kind: "DaemonSet",
      name: "node-exporter",
    });
    expect(workloadOf(pod({ kind: "Job", name: "backup-29012345" }))).toEqual({
      kind: "Job",
      name: "backup-29012345",
    });
    expect(workloadOf(pod())).toBeUndefined();
  });

  it("takes the controller among several owners", () => {
    const p = pod();
    p.metadata = {
      ...p.metadata,
      ownerReferences: [
        { apiVersion: "v1", kind: "ConfigMap", name: "not-me", uid: "1" },
        { apiVersion: "apps/v1", kind: "StatefulSet", name: "db", uid: "2", controller: true },
      ],
    };
    expect(workloadOf(p)).toEqual({ kind: "StatefulSet", name: "db" });
  });

  it("gives the matched container's image and the pod's labels, the first ones by name when there are many", () => {
    const labels = Object.fromEntries(
      Array.from({ length: MAX_POD_LABELS + 10 }, (_, i) => [`k${String(i).padStart(3, "0")}`, `v${i}`]),
    );
    const facts = podFacts(pod({ kind: "StatefulSet", name: "db" }, labels), "sidecar");
    expect(facts?.image).toBe("envoyproxy/envoy:v1.31");
    expect(Object.keys(facts?.labels ?? {})).toHaveLength(MAX_POD_LABELS);
    expect(facts?.labels?.k000).toBe("v0");
    expect(facts?.labels?.[`k${MAX_POD_LABELS}`]).toBeUndefined();
    expect(facts?.workload).toEqual({ kind: "StatefulSet", name: "db" });
  });

  it("has nothing to say for a pod without labels, owner or the container", () => {
    expect(podFacts({ metadata: { name: "p" }, spec: { containers: [] } }, "app")).toBeUndefined();
  });
});
