import { describe, expect, it } from "vitest";
import { imageLayersFor } from "./agent-discovery.ts";

describe("the image layers discovery arms traps in", () => {
  it("are the configured directory only where cgroups are v2", () => {
    const config = { imageLayers: "/snapshots", cgroupRoot: "/sys/fs/cgroup" };
    expect(imageLayersFor(config, () => true)).toBe("/snapshots");
    expect(imageLayersFor(config, () => false)).toBeUndefined();
    expect(imageLayersFor({ cgroupRoot: "/sys/fs/cgroup" }, () => true)).toBeUndefined();
  });
});
