/**
 * The quiet map (runtime/kernel/quiet-map.ts) on the host kernel: the real program loaded without
 * attaching (the host cannot attach kprobes here), its real hive_quiet map, and the loader
 * controller routing events into it. Whether the kernel then skips the checks is the kernel
 * suite's (test/kernel/guest/layer-cases.ts), on real containers.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { trapId } from "../../api/ids.ts";
import type { HivePolicy } from "../../api/policy.ts";
import { buildLayerData } from "../../runtime/controllers/hive-data.ts";
import type { AccessOrigin } from "../../runtime/controllers/layer-routing.ts";
import { createLoaderController } from "../../runtime/controllers/loader.ts";
import type { KernelEvent, KernelWatcher } from "../../runtime/kernel/contract.ts";
import { openKernelWatcher } from "../../runtime/kernel/open-watcher.ts";
import { createLogger } from "../../runtime/log.ts";
import { echoDataWriter } from "../fixtures/data-writer.ts";

const isRoot = process.getuid?.() === 0;
if (!isRoot) console.warn("!!! test/kernel/quiet-map.test.ts: not root, cannot load BPF programs — SKIPPED");
const runIt = isRoot || process.env.CI === "true" ? it : it.skip;

const KERNEL = "eeeeeeee-5555-4555-8555-555555555555";
const LAYER = { major: 8, minor: 1, ino: 500n };
const policy = (name: string, app: string): HivePolicy => ({
  apiVersion: "hive-operator.com/v1alpha1",
  kind: "HivePolicy",
  metadata: { name, namespace: "hive-system", generation: 1 },
  spec: { traps: [{ path: "/etc/secret", match: { matchLabels: { app } } }] },
});
const pod = (name: string, app: string): V1Pod => ({
  metadata: { name, namespace: "apps", uid: `uid-${name}`, labels: { app } },
  spec: { nodeName: "n1", containers: [{ name: "main" }] },
});

describe("the quiet map on the host kernel", () => {
  runIt(
    "an unselected access quiets its cgroup for the layer's group; a change of selection forgets it",
    async () => {
      const real = openKernelWatcher({ attach: false, pinRoot: null, attachMode: "kprobe" });
      // The real watcher, with events handed in here instead of read from its (unattached) ring.
      let deliver: (e: KernelEvent) => void = () => undefined;
      const kernel: KernelWatcher = Object.create(real);
      kernel.onEvent = (listener) => {
        deliver = listener;
      };
      let origin: AccessOrigin | null | undefined;
      const p = policy("reader", "reader");
      const loader = createLoaderController({
        kernelId: KERNEL,
        nodeName: "n1",
        kernel,
        writer: echoDataWriter(),
        log: createLogger({}, { level: "error" }),
        onAccess: () => undefined,
        attribute: () => origin,
        platformNamespace: "hive-system",
        debounceMs: 1,
      });
      try {
        loader.onPolicy("ADDED", p);
        const trap = p.spec.traps[0] ?? { path: "" };
        const layer = buildLayerData({
          policy: p,
          trap,
          trapId: trapId({ namespace: "hive-system", name: "reader" }, trap),
          kernelId: KERNEL,
          nodeName: "n1",
          namespace: "hive-system",
          file: LAYER,
        });
        loader.onData("ADDED", layer);
        loader.markSynced();
        await loader.idle();
        // The layer's entry: the first slot, its own group.
        const slot = 1;
        expect(loader.lookup(slot)).toHaveLength(1);
        const access = (cgroupId: bigint, extra: Partial<KernelEvent> = {}): KernelEvent => ({
          ktimeNs: 1n,
          key: LAYER,
          mask: 0x24,
          accesses: ["read", "open"],
          kind: "file",
          slot,
          group: slot,
          pid: 1,
          tgid: 1,
          uid: 0,
          gid: 0,
          comm: "cat",
          cgroupId,
          count: 1,
          process: { exe: { source: "unknown" }, execNs: 0n },
          ...extra,
        });
        const bystander = { pod: pod("other", "other"), containerId: "b".repeat(64), scheme: "containerd" };

        // Not yet attributable: may be selected a moment later, never quieted.
        origin = undefined;
        deliver(access(7n));
        // Selected: alerted, not quieted.
        origin = { ...bystander, pod: pod("web", "reader"), containerName: "main" };
        deliver(access(8n));
        // A change of the file, even from an unselected container: re-resolution needs it.
        origin = { ...bystander, containerName: "main" };
        deliver(access(9n, { change: "deleted" }));
        // Raised under a group number this loader never wrote for the key (an earlier numbering).
        deliver(access(10n, { slot: 5, group: 5 }));
        expect(real.quieted()).toEqual([]);
        // The bystander: no trap selects its pod. Then the host (no pod's cgroup).
        deliver(access(11n));
        origin = null;
        deliver(access(12n));
        expect(real.quieted().sort((a, b) => Number(a.cgroupId - b.cgroupId))).toEqual([
          { cgroupId: 11n, group: slot },
          { cgroupId: 12n, group: slot },
        ]);

        // A pod changed (discover calls this once its cache shows the change): all forgotten.
        loader.selectionChanged();
        expect(real.quieted()).toEqual([]);
        // A policy changed: likewise, at once, before its sync.
        origin = { ...bystander, containerName: "main" };
        deliver(access(11n));
        expect(real.quieted()).toHaveLength(1);
        // A status write (the same spec) changes no trap; a changed spec does, at once.
        loader.onPolicy("MODIFIED", { ...p, status: {} } as HivePolicy);
        expect(real.quieted()).toHaveLength(1);
        const widened = policy("reader", "reader");
        widened.spec.traps = [{ ...(widened.spec.traps[0] ?? { path: "" }), accesses: ["read", "write"] }];
        loader.onPolicy("MODIFIED", widened);
        expect(real.quieted()).toEqual([]);
        loader.onPolicy("MODIFIED", p);
        const settle = async () => {
          await new Promise((r) => setTimeout(r, 10));
          await loader.idle();
        };
        await settle();

        // A sync whose layer entries and HiveData are the same keeps what is quiet ...
        deliver(access(11n));
        expect(real.quieted()).toHaveLength(1);
        layer.metadata.annotations = { ...layer.metadata.annotations, unrelated: "1" };
        loader.onData("MODIFIED", layer);
        await settle();
        expect(real.quieted()).toHaveLength(1);
        // ... one whose HiveData behind a layer entry changed forgets it before the sync.
        loader.onData("DELETED", layer);
        await settle();
        expect(real.quieted()).toEqual([]);
      } finally {
        loader.stop();
        await real.close();
      }
    },
  );

  runIt("an LRU never refuses a cgroup, and an adopted map is emptied at open", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hive-bpffs-"));
    execFileSync("mount", ["-t", "bpf", "bpf", dir]);
    try {
      const pinRoot = join(dir, "hive");
      const first = openKernelWatcher({ attach: false, pinRoot, attachMode: "kprobe" });
      // More cgroups than the map holds: each write succeeds, the oldest are evicted.
      for (let cg = 1n; cg <= 20_000n; cg++) first.quiet(cg, 3);
      const held = first.quieted();
      expect(held.length).toBeGreaterThan(0);
      expect(held.length).toBeLessThanOrEqual(16_384);
      expect(held.some((q) => q.cgroupId === 20_000n)).toBe(true);
      await first.close({ keepPinned: true });
      // The next agent numbers its groups anew: nothing quieted under the old numbering survives.
      const second = openKernelWatcher({ attach: false, pinRoot, attachMode: "kprobe" });
      expect(second.quieted()).toEqual([]);
      await second.close();
    } finally {
      execFileSync("umount", [dir]);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
