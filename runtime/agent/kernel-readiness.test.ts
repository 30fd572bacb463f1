import { describe, expect, it } from "vitest";
import { echoDataWriter } from "../../test/fixtures/data-writer.ts";
import { RecordingKernel } from "../../test/integration/harness.ts";
import { createLoaderController } from "../controllers/loader.ts";
import { createLogger } from "../log.ts";
import { createHealth } from "../metrics/health.ts";
import { addKernelReadinessChecks, LOSS_WINDOW_MS } from "./kernel-readiness.ts";

const KERNEL = "eeeeeeee-5555-4555-8555-555555555555";

async function failing(health: ReturnType<typeof createHealth>): Promise<string[]> {
  return (await health.readiness()).checks.filter((c) => !c.ok).map((c) => c.name);
}

describe("the kernel's readiness checks", () => {
  it("fail while events are lost, until a minute passes without a loss", async () => {
    const kernel = new RecordingKernel();
    let now = 1_000_000;
    const health = createHealth();
    addKernelReadinessChecks(health, {
      kernel: () => kernel,
      loader: () => undefined,
      loaderFailure: () => undefined,
      now: () => now,
    });
    expect(await failing(health)).toEqual([]);
    kernel.lost = 40n; // the ring buffer was full
    expect(await failing(health)).toEqual(["kernel-losses"]);
    const report = await health.readiness();
    expect(report.checks.find((c) => c.name === "kernel-losses")?.message).toContain("lost 40 events");
    now += LOSS_WINDOW_MS - 1;
    expect(await failing(health)).toEqual(["kernel-losses"]);
    now += 1;
    expect(await failing(health)).toEqual([]);
  });

  it("fail while the loader holds events unrouted, and pass once it routes", async () => {
    const kernel = new RecordingKernel();
    const loader = createLoaderController({
      kernelId: KERNEL,
      nodeName: "n1",
      kernel,
      writer: echoDataWriter(),
      log: createLogger({}, { level: "error" }),
      onAccess: () => {},
      debounceMs: 1,
    });
    const health = createHealth();
    addKernelReadinessChecks(health, {
      kernel: () => kernel,
      loader: () => loader,
      loaderFailure: () => undefined,
    });
    expect(await failing(health)).toEqual(["loader-routing"]);
    loader.markSynced();
    await loader.idle();
    expect(await failing(health)).toEqual([]);
    loader.stop();
  });
});
