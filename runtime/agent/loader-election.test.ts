import { describe, expect, it } from "vitest";
import { endIfGenuinelyHeld } from "./loader-election.ts";

const recorder = () => {
  const warnings: string[] = [];
  return { warnings, logger: { warn: (msg: string) => void warnings.push(msg) } };
};

describe("a resumed loader and a new holder of its kernel's Lease", () => {
  it("keeps running, and never rejects, when the holder's Node cannot be read", async () => {
    const { warnings, logger } = recorder();
    let stopped = false;
    const stop = async () => {
      stopped = true;
    };
    const unreadable = async () => {
      throw new Error("nodes b is forbidden");
    };
    await expect(
      endIfGenuinelyHeld("b/hive-agent-x", unreadable, () => true, stop, logger),
    ).resolves.toBeUndefined();
    expect(stopped).toBe(false);
    expect(warnings).toEqual([expect.stringMatching(/cannot check the new holder/)]);
  });

  it("ends for a genuine holder, and not for a forged or superseded one", async () => {
    for (const [forged, ends] of [
      [false, true],
      [true, false],
    ] as const) {
      const { logger } = recorder();
      let stopped = false;
      const stop = async () => {
        stopped = true;
      };
      await endIfGenuinelyHeld(
        "b/x",
        async () => forged,
        () => true,
        stop,
        logger,
      );
      expect(stopped).toBe(ends);
    }
  });
});
