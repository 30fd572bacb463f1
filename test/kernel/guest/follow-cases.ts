/**
 * Kernel case for standalone mode following containers (runtime/standalone/container-events.ts):
 * `hive watch`'s in-process core (startStandalone, as the CLI composes it) on the real program,
 * a private containerd with the overlayfs snapshotter and the allow image
 * (test/fixtures/image-containers.ts), a trap on the image's /etc/secret in containers by name.
 * Containers start after the traps are planned and no SIGHUP is sent: each must be armed from
 * containerd's event stream, a read by `ctr task exec` alerted with the container's name, and a
 * stopped container's entries removed from the kernel map.
 */
import assert from "node:assert/strict";
import type { Alert } from "../../../api/alert.ts";
import { createAlertPipeline } from "../../../runtime/alerts/pipeline.ts";
import { createHiveMetrics } from "../../../runtime/metrics/metrics.ts";
import { openContainerLister } from "../../../runtime/standalone/local-containers.ts";
import { parsePolicyText } from "../../../runtime/standalone/policy-files.ts";
import { startStandalone } from "../../../runtime/standalone/standalone.ts";
import { captureLogger } from "../../alerts/fixtures.ts";
import { ALLOW_IMAGE_REF } from "../../fixtures/allow-image.ts";
import { startImageContainerd } from "../../fixtures/image-containers.ts";
import type { KernelCaseName } from "./case-names.ts";
import type { GuestHarness } from "./process-cases.ts";

type FollowCaseName = Extract<
  KernelCaseName,
  "standalone follows containers without SIGHUP: each container started later is armed from containerd's event stream and its read alerted with its name; a stopped one's entries leave the kernel map"
>;

const POLICY = `apiVersion: hive-operator.com/v1alpha1
kind: HivePolicy
metadata:
  name: follow-secret
spec:
  traps:
    - path: /etc/secret
      accesses: [read]
      match:
        container-name: "hive-follow-.*"
`;

async function until(what: string, check: () => boolean, timeoutMs: number): Promise<number> {
  const started = Date.now();
  while (!check()) {
    if (Date.now() - started > timeoutMs)
      throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return Date.now() - started;
}

export function followCases(h: GuestHarness): Record<FollowCaseName, () => Promise<Record<string, unknown>>> {
  return {
    async "standalone follows containers without SIGHUP: each container started later is armed from containerd's event stream and its read alerted with its name; a stopped one's entries leave the kernel map"() {
      const archive = process.env.HIVE_ALLOW_IMAGE ?? "";
      assert.ok(
        archive,
        "HIVE_ALLOW_IMAGE (the allow image's OCI archive, built by the host suite) is not set",
      );
      // Where the case's guest time goes (reported with its details).
      const t0 = Date.now();
      const timingsMs: Record<string, number> = {};
      const mark = (what: string) => {
        timingsMs[what] = Date.now() - t0;
      };
      const cd = await startImageContainerd("/tmp/hive-follow-ctd");
      mark("containerd up");
      const lister = await openContainerLister({ socket: cd.sock });
      assert.ok(lister, "the private containerd's socket is missing");
      const log = captureLogger();
      const alerts: Alert[] = [];
      const pipeline = await createAlertPipeline({
        logger: log.logger,
        metrics: createHiveMetrics({ processMetrics: false }),
        lines: (line) => alerts.push(JSON.parse(line) as Alert),
        rateLimit: false,
      });
      cd.importImage(archive);
      mark("image imported");
      const { documents, problems } = parsePolicyText("follow.yaml", POLICY);
      assert.deepEqual(problems, []);
      const standalone = await startStandalone({
        documents,
        watcher: h.watcher(),
        alerts: pipeline,
        logger: log.logger,
        kernelId: "guest",
        listContainers: () => lister.list(),
        containerEvents: lister.events(),
      });
      try {
        await until("the event stream is connected", () => standalone.following?.connected === true, 10_000);
        // The re-list that follows the subscription is done: a start from now on is the event's to arm.
        await standalone.containersChanged({ reason: "settled" });
        assert.equal(standalone.plan.files.length, 0, "nothing is armed before a container starts");
        const ids = ["hive-follow-1", "hive-follow-2"];
        const outcome: Record<string, unknown> = {};
        for (const [i, id] of ids.entries()) {
          cd.run(id, ALLOW_IMAGE_REF, ["/bin/sleep", "1000"]);
          mark(`${id} running`);
          const isArmed = () =>
            standalone.plan.files.some((f) => f.target.kind === "container" && f.target.container.id === id);
          const waitedMs = await until(`${id} is armed`, isArmed, 30_000).catch((error: Error) => {
            // What standalone said meanwhile explains why (a proof refused, a list that failed…).
            const said = log.lines.slice(-12);
            throw new Error(`${error.message}; log: ${JSON.stringify(said)}`);
          });
          // A read a moment after the start, by a process exec'd into the running container.
          const seen = await h.observe(() => {
            const r = cd.exec(id, `read${i}`, ["/bin/cat", "/etc/secret"]);
            assert.equal(r.status, 0, `cat failed in ${id}: ${r.stderr}`);
          });
          assert.ok(seen.length > 0, `no kernel event for the read in ${id}`);
          const mine = alerts.filter((a) => a.pod?.container?.name === id);
          assert.equal(mine.length, 1, `${id}: expected one alert, got ${JSON.stringify(alerts)}`);
          const watching = log.lines.find((l) => l.msg === "watching" && String(l.target).includes(id));
          assert.match(String(watching?.reason), new RegExp(`task started: default/${id}`));
          mark(`${id} read`);
          outcome[id] = { sinceTaskStartMs: watching?.sinceTaskStartMs, waitedAfterRunMs: waitedMs };
        }
        // Stopped: its trap and its directory's entry leave the kernel map.
        const before = h.watcher().counters().watched;
        cd.remove("hive-follow-1");
        await until(
          "hive-follow-1's entries are removed",
          () =>
            !standalone.plan.files.some(
              (f) => f.target.kind === "container" && f.target.container.id === "hive-follow-1",
            ),
          15_000,
        );
        const after = h.watcher().counters().watched;
        assert.ok(after < before, `kernel map entries ${before} -> ${after}`);
        assert.ok(
          log.lines.some(
            (l) => l.msg === "not watching any more" && String(l.target).includes("hive-follow-1"),
          ),
        );
        mark("hive-follow-1 removed");
        return { ...outcome, mapEntries: { before, after }, timingsMs };
      } finally {
        await standalone.close();
        lister.close();
        await pipeline.close();
        await cd.stop();
        mark("cleaned up");
      }
    },
  };
}
