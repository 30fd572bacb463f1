/**
 * Kernel case: traps armed on an image layer's file before any container of the image runs. The
 * agent runs as in a cluster (runAgent, against the real kube-apiserver on the host — reached
 * through the guest's one forwarded address, test/cluster/guest-api.ts — enforcing the rendered
 * RBAC and admission, with a pod-bound token; alerts posted to a receiver) with the real kernel
 * program; containers come from a private containerd with the overlayfs snapshotter (the allow
 * image, imported from its OCI archive), in the cgroups and with the annotations a kubelet's CRI
 * plugin gives them. The pods stay Pending in the API: as in a cluster, the kubelet reports a
 * container only after it ran. A container no trap selects costs one event, then none (the
 * kernel's quiet map) until what selects changes.
 * `hive watch` (layer-standalone.ts) watches the same containers at the same time, on the guest's
 * own program, selecting them by their containerd labels: it must give the same alerts.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import type { Alert } from "../../../api/alert.ts";
import type { HiveData } from "../../../api/data.ts";
import { GROUP, PLURAL_DATA, VERSION } from "../../../api/meta.ts";
import { runAgent } from "../../../runtime/agent/main.ts";
import { ANNOTATION_IMAGE_LAYER } from "../../../runtime/controllers/hive-data.ts";
import { createLogger } from "../../../runtime/log.ts";
import { type WatchTableFile, watchTableFileFor } from "../../../runtime/standalone/watch-table-file.ts";
import { startReceiver } from "../../alerts/receiver.ts";
import { retryOnConflict } from "../../cluster/conflict.ts";
import { guestApi, guestNetworkUp, untilApiAnswers } from "../../cluster/guest-client.ts";
import { seedNode, setPodRunning, waitFor } from "../../cluster/testing.ts";
import { ALLOW_IMAGE_REF } from "../../fixtures/allow-image.ts";
import { startImageContainerd } from "../../fixtures/image-containers.ts";
import type { KernelCaseName } from "./case-names.ts";
import { type StandaloneOnLayers, startStandaloneOnLayers } from "./layer-standalone.ts";
import type { GuestHarness } from "./process-cases.ts";

type LayerCaseName = Extract<
  KernelCaseName,
  "a trap on an image's file holds from each container's first instruction, for the agent and hive watch alike: 20 containers and an init container that read it at once alert, each named; a container no trap selects does not, and is then quieted in the kernel; a resolved container's read alerts once"
>;

const NODE = "node-layers";
const NS = "hive-system";
const APPS = "apps";
/**
 * Containers that read at once: 20 on 6.12; 3 on the other kernels, where what is kernel-specific
 * (the overlay's check of the layer's inode, the cgroup id) is the same for every container and a
 * container start costs seconds of emulated time.
 */
const READERS = Number(process.env.HIVE_LAYER_READERS ?? (process.env.HIVE_VM_KERNEL === "6.12" ? 20 : 3));

/** p50, p90 and max of `ms`, rounded. */
function spread(ms: number[]): { n: number; p50: number; p90: number; max: number } {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) =>
    Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN);
  return { n: sorted.length, p50: at(0.5), p90: at(0.9), max: Math.round(sorted.at(-1) ?? Number.NaN) };
}
const base = "/tmp/hive-layers";

/** A container id as the CRI plugin makes them (64 hex digits). */
const containerId = (n: number) => `${n.toString(16).padStart(12, "0")}${"c".repeat(52)}`;

export function layerCases(h: GuestHarness): Record<LayerCaseName, () => Promise<Record<string, unknown>>> {
  return {
    async "a trap on an image's file holds from each container's first instruction, for the agent and hive watch alike: 20 containers and an init container that read it at once alert, each named; a container no trap selects does not, and is then quieted in the kernel; a resolved container's read alerts once"() {
      const archive = process.env.HIVE_ALLOW_IMAGE ?? "";
      assert.ok(
        archive,
        "HIVE_ALLOW_IMAGE (the allow image's OCI archive, built by the host suite) is not set",
      );
      // The receiver on 127.0.0.1; the API server on the host, at the guest's one forwarded address.
      const api = guestApi();
      await guestNetworkUp();
      mkdirSync(base, { recursive: true });
      const bootId = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
      const receiver = await startReceiver();
      const cd = await startImageContainerd(join(base, "containerd"));
      let stop: () => void = () => undefined;
      const until = new Promise((resolve) => {
        stop = () => resolve("done");
      });
      let exited: Promise<number> | undefined;
      let watch: StandaloneOnLayers | undefined;
      const timings: Record<string, number> = {};
      const t0 = performance.now();
      const mark = (name: string) => {
        timings[name] = Math.round(performance.now() - t0);
      };
      try {
        cd.importImage(archive);
        mark("imageImported");
        const snapshotsDir = join(base, "containerd/root/io.containerd.snapshotter.v1.overlayfs/snapshots");
        watch = await startStandaloneOnLayers(h, cd, snapshotsDir);
        const standalone = watch;
        assert.ok(standalone.layerArmed(), "hive watch armed the image layer's file at its start");
        mark("standaloneArmed");
        await api.install({
          image: "hive:test",
          namespace: NS,
          callback: { url: receiver.url },
          traps: [{ path: "/etc/secret", accesses: ["read"], match: { matchLabels: { app: "reader" } } }],
        });
        const kc = api.kubeConfig();
        const core = kc.makeApiClient(CoreV1Api);
        const custom = kc.makeApiClient(CustomObjectsApi);
        // The Node as its kubelet reports it (this guest's boot id): it owns the agent's HiveData.
        await untilApiAnswers(core);
        await retryOnConflict(() => seedNode(core, NODE, bootId));
        await core.createNamespace({ body: { metadata: { name: APPS } } });
        // The controller manager gives the namespace its default ServiceAccount, which admission
        // requires of every pod there: wait for it as a user's second kubectl command would.
        await waitFor(
          () =>
            core.readNamespacedServiceAccount({ namespace: APPS, name: "default" }).then(
              () => true,
              () => false,
            ),
          { timeoutMs: 60_000, intervalMs: 200, what: `the ServiceAccount default/${APPS}` },
        );
        // The agent's credentials as its pod has them: a token bound to its Pod on this Node.
        const agentKubeconfig = join(base, "agent.kubeconfig");
        writeFileSync(
          agentKubeconfig,
          api.kubeConfig(await api.agentToken(NODE, "hive-agent-layers")).exportConfig(),
        );
        const pinRoot = "/sys/fs/bpf/hive-layers";
        const tableDir = join(base, "run");
        let metricsUrl = "";
        exited = runAgent(
          [
            "--node-name",
            NODE,
            "--pod-name",
            "hive-agent-layers",
            "--namespace",
            NS,
            "--kubeconfig",
            agentKubeconfig,
            "--callback",
            receiver.url,
            "--runtime-socket",
            cd.sock,
            "--containerd-namespace",
            "default",
            "--runtime-state-dir",
            cd.stateDir,
            "--image-layers",
            snapshotsDir,
            "--cgroup-root",
            "/sys/fs/cgroup",
            "--metrics-port",
            "0",
            // As the other kernel cases: emulation can stall a thread between one access's checks.
            "--burst-gap",
            "20",
            "--spool-dir",
            join(base, "spool"),
            "--pin-root",
            pinRoot,
            "--table-dir",
            tableDir,
          ],
          {
            until,
            log: createLogger({}, { level: "warn" }),
            onStarted: (started) => {
              metricsUrl = started.metricsUrl;
            },
          },
        );

        /** A Pending pod (as the API shows it until the kubelet reports), its uid. */
        const createPod = async (name: string, app: string, init = false) => {
          const pod = await core.createNamespacedPod({
            namespace: APPS,
            body: {
              metadata: { name, labels: { app } },
              spec: {
                nodeName: NODE,
                containers: [{ name: "main", image: ALLOW_IMAGE_REF }],
                ...(init ? { initContainers: [{ name: "setup", image: ALLOW_IMAGE_REF }] } : {}),
              },
            },
          });
          return pod.metadata?.uid ?? "";
        };
        /**
         * Starts a container of `uid`'s pod as a kubelet would, its entrypoint `args`; its containerd
         * labels (what hive watch selects by) say its app and name.
         */
        const launch = (uid: string, id: string, name: string, args: string[], app = "reader") =>
          cd.launch(id, ALLOW_IMAGE_REF, args, {
            cgroup: `/kubepods/besteffort/pod${uid}/${id}`,
            annotations: { "io.kubernetes.cri.container-name": name, "io.kubernetes.cri.sandbox-uid": uid },
            labels: { app, "io.kubernetes.container.name": name },
          });

        const uids: string[] = [];
        for (let i = 0; i < READERS; i++) uids.push(await createPod(`reader-${i}`, "reader", i === 0));
        const bystander = await createPod("bystander", "other");
        mark("podsCreated");
        // Armed in the image's layer once the node has a pod the trap applies to: before any container exists.
        const layerKey = await waitFor(
          async () => {
            const list = (await custom.listNamespacedCustomObject({
              group: GROUP,
              version: VERSION,
              namespace: NS,
              plural: PLURAL_DATA,
            })) as { items: HiveData[] };
            const layer = list.items.find((d) => d.metadata.annotations?.[ANNOTATION_IMAGE_LAYER] === "true");
            if (!layer) return undefined;
            const table = watchTableFileFor(pinRoot, tableDir);
            if (!existsSync(table)) return undefined;
            const slots = (JSON.parse(readFileSync(table, "utf8")) as WatchTableFile).slots;
            const armed = slots.find((s) => s.inode === String(layer.spec["inode-no"]) && s.kind === "file");
            return armed ? `${armed.device}:${armed.inode}` : undefined;
          },
          { timeoutMs: 120_000, intervalMs: 100, what: "the image layer's file armed" },
        );
        mark("layerArmed");

        // Entrypoints that read the file at once (and stay); the init container of reader-0 reads and exits.
        launch(uids[0] as string, containerId(1000), "setup", ["/bin/cat", "/etc/secret"]);
        const launchedAt: number[] = [];
        for (let i = 0; i < READERS; i++) {
          launchedAt.push(performance.now());
          launch(uids[i] as string, containerId(i), "main", [
            "/bin/sh",
            "-c",
            "cat /etc/secret; exec sleep 1000",
          ]);
        }
        // The bystander stays (its later reads are exec'd into it: the quiet map's part below).
        launch(
          bystander,
          containerId(2000),
          "main",
          ["/bin/sh", "-c", "cat /etc/secret; exec sleep 1000"],
          "other",
        );
        mark("containersLaunched");
        const alerts = () => receiver.accepted.map((r) => JSON.parse(r.body) as Alert);
        const alertsByContainer = () => {
          const by = new Map<string, Alert[]>();
          for (const a of alerts()) {
            const id = (a.pod?.container.id ?? "").replace(/^containerd:\/\//, "");
            by.set(id, [...(by.get(id) ?? []), a]);
          }
          return by;
        };
        // Every container named at least once (the init container exits at once: under emulation
        // its open and read can come as two bursts, two alerts), not a count of alerts.
        const expected = [...Array.from({ length: READERS }, (_, i) => containerId(i)), containerId(1000)];
        const byContainer = await waitFor(
          () => {
            const by = alertsByContainer();
            return expected.every((id) => by.has(id)) ? by : undefined;
          },
          {
            timeoutMs: 120_000,
            intervalMs: 100,
            what: `alerts naming each of the ${READERS + 1} containers`,
          },
        );
        mark("alertsReceived");
        for (let i = 0; i < READERS; i++) {
          const got = byContainer.get(containerId(i)) ?? [];
          assert.equal(got.length, 1, `reader-${i}: ${JSON.stringify(got)}`);
          assert.equal(got[0]?.pod?.name, `reader-${i}`);
          assert.equal(got[0]?.pod?.container.name, "main");
        }
        assert.equal(byContainer.get(containerId(1000))?.[0]?.pod?.container.name, "setup");
        // hive watch: the same first reads, each named by its container, none for the bystander.
        await waitFor(() => (standalone.alerts.length >= READERS + 1 ? true : undefined), {
          timeoutMs: 60_000,
          intervalMs: 50,
          what: `hive watch's ${READERS + 1} alerts (got ${standalone.alerts.length})`,
        });
        for (const id of [...Array.from({ length: READERS }, (_, i) => containerId(i)), containerId(1000)]) {
          const got = standalone.of(id);
          assert.equal(
            got.length,
            1,
            `hive watch, ${id}: ${JSON.stringify(standalone.alerts.map((a) => a.pod))}`,
          );
          assert.equal(got[0]?.pod?.container.name, id === containerId(1000) ? "setup" : "main");
        }
        mark("standaloneAlerts");

        // The path before image layers, for comparison: the kubelet reports each container running
        // (at once here; a real kubelet takes its next status sync), then discover resolves it in
        // its root and arms its overlay inode through a HiveData. Report to armed, per container:
        const table = () =>
          JSON.parse(readFileSync(watchTableFileFor(pinRoot, tableDir), "utf8")) as WatchTableFile;
        const armedIds = () =>
          new Set(
            table()
              .slots.flatMap((s) => (s.kind === "file" ? s.traps.map((t) => t.target) : []))
              .join(" ")
              .match(/\(([0-9a-f]{12})\)/g) ?? [],
          );
        const reportedAt: number[] = [];
        await Promise.all(
          uids.map(async (_uid, i) => {
            await setPodRunning(core, APPS, `reader-${i}`, {
              containerIds: { main: `containerd://${containerId(i)}` },
            });
            reportedAt[i] = performance.now();
          }),
        );
        const armedAt: number[] = [];
        await waitFor(
          () => {
            const ids = armedIds();
            const now = performance.now();
            for (let i = 0; i < READERS; i++)
              if (armedAt[i] === undefined && ids.has(`(${containerId(i).slice(0, 12)})`)) armedAt[i] = now;
            return armedAt.filter((t) => t !== undefined).length === READERS ? true : undefined;
          },
          { timeoutMs: 180_000, intervalMs: 25, what: "every reader's own overlay inode armed" },
        );
        mark("containersResolved");
        const layerArmedAt = timings.layerArmed ?? 0;
        const arming = {
          // The image layer's file armed after the pods were created (the last of them), before any container.
          podsCreatedToLayerArmedMs: (timings.layerArmed ?? 0) - (timings.podsCreated ?? 0),
          // Negative: armed that long before the container was created.
          imageLayerCreateToArmedMs: spread(launchedAt.map((t) => layerArmedAt + t0 - t)),
          perContainerReportToArmedMs: spread(armedAt.map((t, i) => t - (reportedAt[i] ?? t))),
        };

        // A resolved container: its overlay inode and the layer's are checked by each read; one alert each.
        const resident = containerId(1);
        await waitFor(() => (standalone.containerArmed(resident) ? true : undefined), {
          timeoutMs: 60_000,
          intervalMs: 50,
          what: "hive watch armed the running container's own file",
        });
        const before = receiver.accepted.length;
        for (let i = 0; i < 3; i++) {
          const r = cd.exec(resident, `read-${i}`, ["/bin/cat", "/etc/secret"]);
          assert.equal(r.status, 0, r.stderr);
        }
        await receiver.waitForDistinct(before + 3, 60_000);
        // Anything more would come within the burst gap and the ring's read; give it a second.
        await new Promise((r) => setTimeout(r, 1000));
        const residentAlerts = alerts().filter((a) => a.pod?.name === "reader-1");
        assert.equal(residentAlerts.length, 4, JSON.stringify(residentAlerts.map((a) => a.metadata)));
        assert.ok(
          residentAlerts.every((a) => a.pod?.container.id === `containerd://${resident}`),
          "the reads are named after their container",
        );
        // The bystander (no trap applies to its pod) raised nothing, and was counted as such.
        assert.equal(byContainer.get(containerId(2000)), undefined);
        const metrics = await (await fetch(`${metricsUrl}/metrics`)).text();
        assert.match(metrics, /hive_kernel_events_dropped_total\{reason="unselected"\} [1-9]/);
        assert.doesNotMatch(metrics, /hive_kernel_events_dropped_total\{reason="unattributed"\} [1-9]/);
        // hive watch likewise: the resident's reads once each, the bystander counted, never alerted.
        await waitFor(() => (standalone.of(resident).length >= 4 ? true : undefined), {
          timeoutMs: 30_000,
          intervalMs: 50,
          what: "hive watch's alerts for the resident's reads",
        });
        assert.equal(
          standalone.of(resident).length,
          4,
          JSON.stringify(standalone.of(resident).map((a) => a.metadata)),
        );
        assert.deepEqual(standalone.of(containerId(2000)), []);
        assert.ok((standalone.dropped.unselected ?? 0) >= 1, JSON.stringify(standalone.dropped));
        assert.equal(standalone.dropped.unattributed, undefined, JSON.stringify(standalone.dropped));

        // The quiet map: a container no trap selects costs one event, then none. Pods and HiveData
        // changed since its entrypoint's read (each change forgets what was quiet): one read first.
        const counts = async () => {
          const text = await (await fetch(`${metricsUrl}/metrics`)).text();
          const pick = (name: string) => Number(new RegExp(`^${name} (\\d+)`, "m").exec(text)?.[1] ?? 0);
          return {
            quiet: pick("hive_kernel_checks_quiet_total"),
            unselected: pick('hive_kernel_events_dropped_total\\{reason="unselected"\\}'),
            events: pick("hive_kernel_events_total"),
          };
        };
        const read = (id: string, execId: string) => {
          const r = cd.exec(id, execId, ["/bin/cat", "/etc/secret"]);
          assert.equal(r.status, 0, r.stderr);
        };
        const quietT0 = performance.now();
        const before0 = await counts();
        read(containerId(2000), "quiet-0");
        const quieted = await waitFor(
          async () => {
            const c = await counts();
            return c.unselected > before0.unselected || c.quiet > before0.quiet ? c : undefined;
          },
          { timeoutMs: 30_000, intervalMs: 50, what: "the bystander's read dropped (or quiet already)" },
        );
        const selectedBefore = alerts().filter((a) => a.pod?.name === "reader-1").length;
        for (let i = 1; i <= 2; i++) read(containerId(2000), `quiet-${i}`);
        // The selected container's read meanwhile: its cgroup is never quiet.
        read(resident, "selected-0");
        await waitFor(async () => ((await counts()).quiet >= quieted.quiet + 2 ? true : undefined), {
          timeoutMs: 30_000,
          intervalMs: 50,
          what: "the bystander's reads skipped in the kernel",
        });
        await receiver.waitForDistinct(before + 4, 60_000);
        await new Promise((r) => setTimeout(r, 500)); // a burst's gap and the ring's read
        const after = await counts();
        assert.equal(after.unselected, quieted.unselected, "no more bystander events dropped in user space");
        // The selected read's event at most (a swept burst is not counted there), none of the bystander's.
        assert.ok(after.events - quieted.events <= 1, JSON.stringify({ quieted, after }));
        assert.equal(alerts().filter((a) => a.pod?.name === "reader-1").length, selectedBefore + 1);
        assert.equal(alerts().filter((a) => a.pod?.name === "bystander").length, 0);

        // What selects changes: the bystander's pod is relabelled so that the trap selects it. Its
        // cgroup is forgotten as soon as this node's pod cache shows the change; a read then alerts.
        // User space over the same kernel behaviour as above: on 6.12 only.
        let readsUntilAlert = 0;
        if (process.env.HIVE_VM_KERNEL === "6.12") {
          const current = await core.readNamespacedPod({ namespace: APPS, name: "bystander" });
          await core.replaceNamespacedPod({
            namespace: APPS,
            name: "bystander",
            body: { ...current, metadata: { ...current.metadata, labels: { app: "reader" } } },
          });
          await waitFor(
            async () => {
              readsUntilAlert += 1;
              read(containerId(2000), `selected-now-${readsUntilAlert}`);
              await new Promise((r) => setTimeout(r, 300));
              return alerts().some((a) => a.pod?.name === "bystander") ? true : undefined;
            },
            { timeoutMs: 30_000, intervalMs: 1, what: "the relabelled bystander's read alerted" },
          );
        }
        const quiet = {
          ...after,
          readsUntilAlert,
          seconds: Math.round((performance.now() - quietT0) / 100) / 10,
        };
        return {
          timings,
          layerKey,
          alerts: receiver.accepted.length,
          readers: READERS,
          arming,
          standalone: { alerts: watch.alerts.length, dropped: watch.dropped },
          quiet,
        };
      } finally {
        await watch?.close();
        stop();
        await exited?.catch(() => undefined);
        await cd.stop();
        await receiver.close();
      }
    },
  };
}
