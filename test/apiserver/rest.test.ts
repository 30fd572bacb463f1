/**
 * The stand-in's REST semantics, checked with the real @kubernetes/client-node against what
 * the Kubernetes API documents (API concepts, object metadata, status subresource,
 * finalizers, garbage collection). Controller tests rely on each of these behaviours.
 */
import {
  ApiextensionsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  V1MicroTime,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, startApiServer } from "./server.ts";
import { podBody, rejection, setPodRunning, statusOf, waitFor } from "./testing.ts";

let api: ApiServer;
let core: CoreV1Api;
let custom: CustomObjectsApi;
const G = { group: "hive-operator.com", version: "v1alpha1" };
/** The HivePolicy collection of the test namespace, as CustomObjectsApi addresses it. */
const POLICIES = { ...G, plural: "hivepolicies", namespace: "rest" };
const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const STRATEGIC = setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch);

function policy(name: string, path = "/etc/shadow") {
  return {
    apiVersion: "hive-operator.com/v1alpha1",
    kind: "HivePolicy",
    metadata: { name },
    spec: { traps: [{ path }] },
  };
}

beforeAll(async () => {
  api = await startApiServer();
  const kc = api.kubeConfig();
  core = kc.makeApiClient(CoreV1Api);
  custom = kc.makeApiClient(CustomObjectsApi);
  await core.createNamespace({ body: { metadata: { name: "rest" } } });
});
afterAll(async () => {
  await api.stop();
});

describe("object metadata", () => {
  it("assigns uid, creationTimestamp, generation 1 and a cluster-wide increasing resourceVersion", async () => {
    const a = await core.createNamespacedPod({ namespace: "rest", body: podBody("meta-a") });
    const b = (await custom.createNamespacedCustomObject({
      ...POLICIES,
      body: policy("meta-b"),
    })) as {
      metadata: { resourceVersion: string; uid: string };
    };
    expect(a.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.metadata?.creationTimestamp).toBeInstanceOf(Date);
    expect(a.metadata?.generation).toBe(1);
    expect(Number(b.metadata.resourceVersion)).toBeGreaterThan(Number(a.metadata?.resourceVersion));
    expect(b.metadata.uid).not.toBe(a.metadata?.uid);
    const got = await core.readNamespacedPod({ namespace: "rest", name: "meta-a" });
    expect(got.metadata?.resourceVersion).toBe(a.metadata?.resourceVersion);
  });

  it("resets a new pod's status to Pending, as kube-apiserver does", async () => {
    const p = await core.createNamespacedPod({
      namespace: "rest",
      body: { ...podBody("status-reset"), status: { phase: "Running" } },
    });
    expect(p.status?.phase).toBe("Pending");
  });

  it("generates a name from generateName", async () => {
    const p = await core.createNamespacedPod({
      namespace: "rest",
      body: { metadata: { generateName: "gen-" }, spec: podBody("x").spec },
    });
    expect(p.metadata?.name).toMatch(/^gen-[a-z0-9]{5}$/);
  });
});

describe("Status errors", () => {
  it("answers 409 AlreadyExists with the Status body kube-apiserver writes", async () => {
    await core.createNamespacedPod({ namespace: "rest", body: podBody("dup") });
    const err = await rejection(core.createNamespacedPod({ namespace: "rest", body: podBody("dup") }));
    expect(statusOf(err)).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: 'pods "dup" already exists',
      reason: "AlreadyExists",
      details: { name: "dup", kind: "pods" },
      code: 409,
    });
  });

  it("answers 404 NotFound naming resource.group for custom resources", async () => {
    const err = await rejection(custom.getNamespacedCustomObject({ ...POLICIES, name: "nope" }));
    expect(statusOf(err)).toMatchObject({
      kind: "Status",
      status: "Failure",
      reason: "NotFound",
      code: 404,
      message: 'hivepolicies.hive-operator.com "nope" not found',
      details: { name: "nope", group: "hive-operator.com", kind: "hivepolicies" },
    });
  });

  it("answers 404 for a namespace that does not exist", async () => {
    const err = await rejection(core.createNamespacedPod({ namespace: "missing", body: podBody("x") }));
    expect(statusOf(err)).toMatchObject({
      reason: "NotFound",
      code: 404,
      message: 'namespaces "missing" not found',
    });
  });

  it("answers 422 Invalid for a custom resource that violates its CRD schema", async () => {
    const err = await rejection(
      custom.createNamespacedCustomObject({
        ...POLICIES,
        body: { ...policy("bad"), spec: { traps: [{ path: 7 }] } },
      }),
    );
    const s = statusOf(err);
    expect(s).toMatchObject({ reason: "Invalid", code: 422 });
    expect(s.message).toContain("spec.traps[0].path");
  });

  it("evaluates the CRD's CEL rules (x-kubernetes-validations) on writes", async () => {
    const dotdot = await rejection(
      custom.createNamespacedCustomObject({
        ...POLICIES,
        body: policy("cel-dotdot", "/etc/../shadow"),
      }),
    );
    expect(statusOf(dotdot)).toMatchObject({ reason: "Invalid", code: 422 });
    expect(statusOf(dotdot).message).toContain(
      "spec.traps[0].path: Invalid value: path must not contain '..' components",
    );
    const mode = await rejection(
      custom.createNamespacedCustomObject({
        ...POLICIES,
        body: { ...policy("cel-mode"), spec: { traps: [{ path: "/x", mode: 644 }] } },
      }),
    );
    expect(statusOf(mode).message).toContain("mode only applies with create: true");
    await custom.createNamespacedCustomObject({
      ...POLICIES,
      body: { ...policy("cel-ok"), spec: { traps: [{ path: "/x", create: true, mode: "0644" }] } },
    });
  });

  it("answers 400 for a malformed label selector and for an unsupported field selector", async () => {
    const bad = await rejection(core.listNamespacedPod({ namespace: "rest", labelSelector: "a in (b" }));
    expect(statusOf(bad)).toMatchObject({ reason: "BadRequest", code: 400 });
    const field = await rejection(
      core.listNamespacedPod({ namespace: "rest", fieldSelector: "spec.image=x" }),
    );
    expect(statusOf(field)).toMatchObject({
      reason: "BadRequest",
      code: 400,
      message: "field label not supported: spec.image",
    });
  });
});

describe("updates", () => {
  it("rejects a PUT with a stale resourceVersion with 409 Conflict and accepts the current one", async () => {
    const p = await core.createNamespacedPod({ namespace: "rest", body: podBody("conflict") });
    const fresh = await core.replaceNamespacedPod({
      namespace: "rest",
      name: "conflict",
      body: { ...p, metadata: { ...p.metadata, labels: { v: "1" } } },
    });
    expect(Number(fresh.metadata?.resourceVersion)).toBeGreaterThan(Number(p.metadata?.resourceVersion));
    const err = await rejection(
      core.replaceNamespacedPod({
        namespace: "rest",
        name: "conflict",
        body: { ...p, metadata: { ...p.metadata, labels: { v: "2" } } },
      }),
    );
    expect(statusOf(err)).toMatchObject({
      reason: "Conflict",
      code: 409,
      message:
        'Operation cannot be fulfilled on pods "conflict": the object has been modified; please apply your changes to the latest version and try again',
    });
  });

  it("does not write a no-op update: same resourceVersion back", async () => {
    const p = await core.createNamespacedPod({ namespace: "rest", body: podBody("noop") });
    const again = await core.replaceNamespacedPod({ namespace: "rest", name: "noop", body: p });
    expect(again.metadata?.resourceVersion).toBe(p.metadata?.resourceVersion);
  });

  it("bumps generation on spec changes only", async () => {
    const created = (await custom.createNamespacedCustomObject({
      ...POLICIES,
      body: policy("gen"),
    })) as {
      metadata: { generation: number };
    };
    const labelled = (await custom.patchNamespacedCustomObject(
      {
        ...POLICIES,
        name: "gen",
        body: { metadata: { labels: { a: "b" } } },
      },
      MERGE,
    )) as { metadata: { generation: number } };
    expect(labelled.metadata.generation).toBe(created.metadata.generation);
    const edited = (await custom.patchNamespacedCustomObject(
      {
        ...POLICIES,
        name: "gen",
        body: { spec: { traps: [{ path: "/etc/passwd" }] } },
      },
      MERGE,
    )) as { metadata: { generation: number } };
    expect(edited.metadata.generation).toBe(created.metadata.generation + 1);
  });

  it("status subresource: /status changes only status; the main endpoint ignores status", async () => {
    await custom.createNamespacedCustomObject({
      ...POLICIES,
      body: policy("st"),
    });
    const viaStatus = (await custom.patchNamespacedCustomObjectStatus(
      {
        ...POLICIES,
        name: "st",
        body: { spec: { traps: [{ path: "/changed" }] }, status: { trapCount: 1 } },
      },
      MERGE,
    )) as {
      spec: { traps: { path: string }[] };
      status: { trapCount: number };
      metadata: { generation: number };
    };
    expect(viaStatus.status.trapCount).toBe(1);
    expect(viaStatus.spec.traps[0]?.path).toBe("/etc/shadow");
    expect(viaStatus.metadata.generation).toBe(1);
    const viaMain = (await custom.patchNamespacedCustomObject(
      { ...POLICIES, name: "st", body: { status: { trapCount: 9 } } },
      MERGE,
    )) as { status: { trapCount: number } };
    expect(viaMain.status.trapCount).toBe(1);
    const pod = await core.createNamespacedPod({
      namespace: "rest",
      body: podBody("st-pod", { node: "n1" }),
    });
    const running = await core.replaceNamespacedPodStatus({
      namespace: "rest",
      name: "st-pod",
      body: { ...pod, status: { phase: "Running", podIP: "10.0.0.9" } },
    });
    expect(running.status?.phase).toBe("Running");
    const viaHelper = await setPodRunning(core, "rest", "st-pod", {
      podIP: "10.0.0.10",
      containerIds: { app: "containerd://abc" },
    });
    expect(viaHelper.status?.containerStatuses?.[0]?.containerID).toBe("containerd://abc");
    expect(viaHelper.metadata?.generation).toBe(1);
  });

  it("applies JSON patch (client-node's default), merge patch and strategic merge patch", async () => {
    await core.createNamespacedPod({ namespace: "rest", body: podBody("patchy", { labels: { a: "1" } }) });
    const json = await core.patchNamespacedPod({
      namespace: "rest",
      name: "patchy",
      body: [
        { op: "test", path: "/metadata/labels/a", value: "1" },
        { op: "add", path: "/metadata/labels/b", value: "2" },
      ],
    });
    expect(json.metadata?.labels).toEqual({ a: "1", b: "2" });
    const strategic = await core.patchNamespacedPod(
      { namespace: "rest", name: "patchy", body: { metadata: { labels: { a: null, c: "3" } } } },
      STRATEGIC,
    );
    expect(strategic.metadata?.labels).toEqual({ b: "2", c: "3" });
    const failedTest = await rejection(
      core.patchNamespacedPod({
        namespace: "rest",
        name: "patchy",
        body: [{ op: "test", path: "/metadata/labels/b", value: "x" }],
      }),
    );
    expect(statusOf(failedTest).code).toBe(422);
  });

  it("treats a resourceVersion inside a merge patch as a precondition", async () => {
    const p = await core.createNamespacedPod({ namespace: "rest", body: podBody("patch-rv") });
    await core.patchNamespacedPod(
      { namespace: "rest", name: "patch-rv", body: { metadata: { labels: { x: "1" } } } },
      MERGE,
    );
    const err = await rejection(
      core.patchNamespacedPod(
        {
          namespace: "rest",
          name: "patch-rv",
          body: { metadata: { resourceVersion: p.metadata?.resourceVersion, labels: { x: "2" } } },
        },
        MERGE,
      ),
    );
    expect(statusOf(err).reason).toBe("Conflict");
  });
});

describe("selectors", () => {
  beforeAll(async () => {
    await core.createNamespace({ body: { metadata: { name: "sel" } } });
    const pods: [string, Record<string, string>, string][] = [
      ["s1", { security: "high", tier: "web" }, "node-a"],
      ["s2", { security: "low", tier: "web" }, "node-a"],
      ["s3", { tier: "db" }, "node-b"],
      ["s4", { security: "high" }, "node-b"],
    ];
    for (const [name, labels, node] of pods)
      await core.createNamespacedPod({ namespace: "sel", body: podBody(name, { labels, node }) });
  });

  const names = async (labelSelector?: string, fieldSelector?: string) =>
    (
      await core.listNamespacedPod({
        namespace: "sel",
        ...(labelSelector ? { labelSelector } : {}),
        ...(fieldSelector ? { fieldSelector } : {}),
      })
    ).items
      .map((p) => p.metadata?.name)
      .sort();

  it.each([
    ["security=high", ["s1", "s4"]],
    ["security==high", ["s1", "s4"]],
    ["security!=high", ["s2", "s3"]],
    ["security in (high,low)", ["s1", "s2", "s4"]],
    ["security notin (high)", ["s2", "s3"]],
    ["security", ["s1", "s2", "s4"]],
    ["!security", ["s3"]],
    ["security=high,tier=web", ["s1"]],
  ])("label selector %s", async (sel, expected) => {
    expect(await names(sel)).toEqual(expected);
  });

  it("field selectors on spec.nodeName, metadata.name and status.phase", async () => {
    expect(await names(undefined, "spec.nodeName=node-b")).toEqual(["s3", "s4"]);
    expect(await names(undefined, "spec.nodeName!=node-b")).toEqual(["s1", "s2"]);
    expect(await names(undefined, "metadata.name=s2")).toEqual(["s2"]);
    expect(await names("security=high", "spec.nodeName=node-a,status.phase=Pending")).toEqual(["s1"]);
    expect(await names(undefined, "status.phase=Running")).toEqual([]);
  });

  it("lists across namespaces with a field selector (the DaemonSet's own-node query)", async () => {
    const all = await core.listPodForAllNamespaces({ fieldSelector: "spec.nodeName=node-a" });
    expect(all.items.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`).sort()).toEqual([
      "sel/s1",
      "sel/s2",
    ]);
  });
});

describe("pagination", () => {
  beforeAll(async () => {
    await core.createNamespace({ body: { metadata: { name: "pages" } } });
    for (let i = 0; i < 7; i++)
      await core.createNamespacedPod({ namespace: "pages", body: podBody(`p${i}`) });
  });

  it("pages with limit and continue over a consistent snapshot", async () => {
    const first = await core.listNamespacedPod({ namespace: "pages", limit: 3 });
    expect(first.items.map((p) => p.metadata?.name)).toEqual(["p0", "p1", "p2"]);
    expect(first.metadata?.remainingItemCount).toBe(4);
    // A write between pages is not seen by this list (same resourceVersion snapshot).
    await core.createNamespacedPod({ namespace: "pages", body: podBody("p00") });
    const second = await core.listNamespacedPod({
      namespace: "pages",
      limit: 3,
      _continue: first.metadata?._continue,
    });
    const third = await core.listNamespacedPod({
      namespace: "pages",
      limit: 3,
      _continue: second.metadata?._continue,
    });
    expect([...second.items, ...third.items].map((p) => p.metadata?.name)).toEqual(["p3", "p4", "p5", "p6"]);
    expect(third.metadata?._continue).toBeFalsy();
    expect(second.metadata?.resourceVersion).toBe(first.metadata?.resourceVersion);
    await core.deleteNamespacedPod({ namespace: "pages", name: "p00" });
  });

  it("answers 410 Expired to a continue token from before a compaction", async () => {
    const first = await core.listNamespacedPod({ namespace: "pages", limit: 2 });
    await core.createNamespacedPod({ namespace: "pages", body: podBody("p-after") });
    api.compact();
    const err = await rejection(
      core.listNamespacedPod({ namespace: "pages", limit: 2, _continue: first.metadata?._continue }),
    );
    expect(statusOf(err)).toMatchObject({ kind: "Status", reason: "Expired", code: 410 });
  });
});

describe("deletion", () => {
  it("with finalizers: 202, deletionTimestamp set, gone once the last finalizer is removed", async () => {
    await custom.createNamespacedCustomObject({
      ...POLICIES,
      body: { ...policy("fin"), metadata: { name: "fin", finalizers: ["hive-operator.com/finalizer"] } },
    });
    const deleting = (await custom.deleteNamespacedCustomObject({
      ...POLICIES,
      name: "fin",
    })) as {
      metadata: { deletionTimestamp?: string; finalizers: string[] };
    };
    expect(deleting.metadata.deletionTimestamp).toBeTruthy();
    expect(api.requests.at(-1)?.code).toBe(202);
    const err = await rejection(
      custom.patchNamespacedCustomObject(
        {
          ...POLICIES,
          name: "fin",
          body: { metadata: { finalizers: ["hive-operator.com/finalizer", "other"] } },
        },
        MERGE,
      ),
    );
    expect(statusOf(err).reason).toBe("Invalid");
    await custom.patchNamespacedCustomObject(
      {
        ...POLICIES,
        name: "fin",
        body: { metadata: { finalizers: null } },
      },
      MERGE,
    );
    const gone = await rejection(custom.getNamespacedCustomObject({ ...POLICIES, name: "fin" }));
    expect(statusOf(gone).code).toBe(404);
  });

  it("garbage-collects dependents whose owner is deleted (background), keeps them with Orphan", async () => {
    const owner = await core.createNamespacedPod({ namespace: "rest", body: podBody("owner") });
    const ref = { apiVersion: "v1", kind: "Pod", name: "owner", uid: owner.metadata?.uid as string };
    const data = (name: string) => ({
      apiVersion: "hive-operator.com/v1alpha1",
      kind: "HiveData",
      metadata: { name, ownerReferences: [ref] },
      spec: {
        "inode-no": 5,
        "kernel-id": "0b5e2c8a-9a4e-4a8e-9d86-3c55d0c1d6a1",
        device: { major: 0, minor: 40 },
        accesses: ["read"],
      },
    });
    await custom.createNamespacedCustomObject({
      ...G,
      plural: "hivedata",
      namespace: "rest",
      body: data("dep-1"),
    });
    await core.deleteNamespacedPod({ namespace: "rest", name: "owner" });
    await waitFor(
      async () => {
        const err = await custom
          .getNamespacedCustomObject({ ...G, plural: "hivedata", namespace: "rest", name: "dep-1" })
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        return err !== undefined && statusOf(err).code === 404;
      },
      { what: "dependent to be garbage-collected" },
    );
    const owner2 = await core.createNamespacedPod({ namespace: "rest", body: podBody("owner2") });
    await custom.createNamespacedCustomObject({
      ...G,
      plural: "hivedata",
      namespace: "rest",
      body: {
        ...data("dep-2"),
        metadata: {
          name: "dep-2",
          ownerReferences: [{ ...ref, name: "owner2", uid: owner2.metadata?.uid as string }],
        },
      },
    });
    await core.deleteNamespacedPod({ namespace: "rest", name: "owner2", propagationPolicy: "Orphan" });
    await new Promise((r) => setTimeout(r, 50));
    const kept = (await custom.getNamespacedCustomObject({
      ...G,
      plural: "hivedata",
      namespace: "rest",
      name: "dep-2",
    })) as {
      metadata: { ownerReferences?: unknown[] };
    };
    expect(kept.metadata.ownerReferences).toBeUndefined();
  });

  it("foreground deletion keeps the owner (foregroundDeletion finalizer) until its dependents are gone", async () => {
    const owner = await core.createNamespacedPod({ namespace: "rest", body: podBody("fg-owner") });
    const dep = podBody("fg-dep");
    await core.createNamespacedPod({
      namespace: "rest",
      body: {
        ...dep,
        metadata: {
          ...dep.metadata,
          finalizers: ["example.com/hold"],
          ownerReferences: [
            { apiVersion: "v1", kind: "Pod", name: "fg-owner", uid: owner.metadata?.uid as string },
          ],
        },
      },
    });
    await core.deleteNamespacedPod({ namespace: "rest", name: "fg-owner", propagationPolicy: "Foreground" });
    const waiting = await core.readNamespacedPod({ namespace: "rest", name: "fg-owner" });
    expect(waiting.metadata?.finalizers).toContain("foregroundDeletion");
    expect(waiting.metadata?.deletionTimestamp).toBeTruthy();
    await waitFor(
      async () =>
        Boolean(
          (await core.readNamespacedPod({ namespace: "rest", name: "fg-dep" })).metadata?.deletionTimestamp,
        ),
      {
        what: "the dependent to be deleting",
      },
    );
    await core.patchNamespacedPod({
      namespace: "rest",
      name: "fg-dep",
      body: [{ op: "remove", path: "/metadata/finalizers" }],
    });
    await waitFor(
      async () =>
        (await core.listNamespacedPod({ namespace: "rest", fieldSelector: "metadata.name=fg-owner" })).items
          .length === 0,
      {
        what: "the owner to go",
      },
    );
  });

  it("empties a deleted namespace, then removes it", async () => {
    await core.createNamespace({ body: { metadata: { name: "doomed" } } });
    await core.createNamespacedPod({ namespace: "doomed", body: podBody("inside") });
    const held = podBody("held");
    await core.createNamespacedPod({
      namespace: "doomed",
      body: { ...held, metadata: { ...held.metadata, finalizers: ["example.com/hold"] } },
    });
    await core.deleteNamespace({ name: "doomed" });
    const ns = await core.readNamespace({ name: "doomed" });
    expect(ns.status?.phase).toBe("Terminating");
    expect(ns.metadata?.deletionTimestamp).toBeTruthy();
    // The namespace stays (Terminating) while an object in it still has a finalizer.
    await waitFor(async () => (await core.listNamespacedPod({ namespace: "doomed" })).items.length === 1, {
      what: "namespace emptied",
    });
    const stillThere = await core.readNamespacedPod({ namespace: "doomed", name: "held" });
    expect(stillThere.metadata?.deletionTimestamp).toBeTruthy();
    const refused = await rejection(core.createNamespacedPod({ namespace: "doomed", body: podBody("late") }));
    expect(statusOf(refused).reason).toBe("Forbidden");
    await core.patchNamespacedPod({
      namespace: "doomed",
      name: "held",
      body: [{ op: "remove", path: "/metadata/finalizers" }],
    });
    await waitFor(
      async () => (await core.listNamespace()).items.every((n) => n.metadata?.name !== "doomed"),
      { what: "namespace removal" },
    );
    expect(
      (await core.listPodForAllNamespaces({ fieldSelector: "metadata.namespace=doomed" })).items,
    ).toEqual([]);
  });
});

describe("CRDs and leases", () => {
  it("serves the kind of a CRD created through the API, and stops serving it when deleted", async () => {
    const ext = api.kubeConfig().makeApiClient(ApiextensionsV1Api);
    await ext.createCustomResourceDefinition({
      body: {
        metadata: { name: "widgets.example.com" },
        spec: {
          group: "example.com",
          scope: "Namespaced",
          names: { plural: "widgets", singular: "widget", kind: "Widget" },
          versions: [
            {
              name: "v1",
              served: true,
              storage: true,
              schema: {
                openAPIV3Schema: {
                  type: "object",
                  properties: {
                    spec: {
                      type: "object",
                      properties: {
                        size: { type: "integer" },
                        // client-node's model spells these `_default` and `x_kubernetes_…` (it sends the real names).
                        color: { type: "string", _default: "blue" },
                        extra: { type: "object", x_kubernetes_preserve_unknown_fields: true },
                      },
                    },
                  },
                },
              },
            },
          ],
        },
      },
    });
    const w = { group: "example.com", version: "v1", plural: "widgets", namespace: "rest" };
    const created = (await custom.createNamespacedCustomObject({
      ...w,
      body: {
        apiVersion: "example.com/v1",
        kind: "Widget",
        metadata: { name: "w1" },
        spec: { size: 3, undeclared: true, extra: { anything: 1 } },
        topLevel: "x",
      },
    })) as Record<string, unknown>;
    // Structural schema: undeclared fields pruned, defaults applied, preserve-unknown-fields kept.
    expect(created.spec).toEqual({ size: 3, color: "blue", extra: { anything: 1 } });
    expect(created.topLevel).toBeUndefined();
    const listed = (await custom.listNamespacedCustomObject(w)) as {
      items: { metadata: { name: string } }[];
    };
    expect(listed.items.map((i) => i.metadata.name)).toEqual(["w1"]);
    await ext.deleteCustomResourceDefinition({ name: "widgets.example.com" });
    const err = await rejection(custom.listNamespacedCustomObject(w));
    expect(statusOf(err).code).toBe(404);
  });

  it("refuses an Event whose involvedObject is in another namespace", async () => {
    // An Event in "rest" about pod p of `podNamespace`.
    const createEvent = (name: string, podNamespace: string) =>
      core.createNamespacedEvent({
        namespace: "rest",
        body: {
          metadata: { name },
          involvedObject: { kind: "Pod", name: "p", namespace: podNamespace },
          reason: "Test",
          message: "m",
        },
      });
    const err = await rejection(createEvent("ev1", "default"));
    expect(statusOf(err)).toMatchObject({ reason: "Invalid", code: 422 });
    expect(statusOf(err).message).toContain("involvedObject.namespace");
    const ok = await createEvent("ev2", "rest");
    expect(ok.metadata?.name).toBe("ev2");
  });

  it("accepts Lease times as MicroTime and refuses millisecond timestamps, like kube-apiserver", async () => {
    const coordination = api.kubeConfig().makeApiClient(CoordinationV1Api);
    const ok = await coordination.createNamespacedLease({
      namespace: "rest",
      body: {
        metadata: { name: "l1" },
        spec: { holderIdentity: "a", renewTime: new V1MicroTime(), leaseDurationSeconds: 1 },
      },
    });
    expect(ok.spec?.holderIdentity).toBe("a");
    const err = await rejection(
      coordination.createNamespacedLease({
        namespace: "rest",
        body: { metadata: { name: "l2" }, spec: { renewTime: new Date() as V1MicroTime } },
      }),
    );
    expect(statusOf(err).code).toBe(400);
  });
});
