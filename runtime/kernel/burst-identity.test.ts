import { describe, expect, it } from "vitest";
import { BurstIdentity, EVENT_LAYOUT as L } from "./event-record.ts";

/** Two records back to back, the second's burst opened at `ktimeNs` by thread 4242. */
const records = (ktimeNs: bigint) => {
  const bytes = Buffer.alloc(2 * L.size);
  bytes.writeUInt32LE(4242, L.size + L.pid);
  bytes.writeBigUInt64LE(ktimeNs, L.size + L.ktime_ns);
  return bytes;
};

describe("a burst's identity read in place", () => {
  it("reads the thread and the first check's time of the record at an offset", () => {
    const burst = new BurstIdentity().read(records(0x1_2345_6789n), L.size);
    expect(burst.pid).toBe(4242);
    expect(burst.ktimeNs).toBe(0x1_2345_6789n);
  });

  it("tells a burst opened before the agent adopted the ring, across the time's two words", () => {
    const adopted = 0x5_0000_0010n;
    const adoptedLater = (ktimeNs: bigint) =>
      new BurstIdentity(adopted).read(records(ktimeNs), L.size).openedBeforeAdoption();
    expect(adoptedLater(adopted - 1n)).toBe(true);
    expect(adoptedLater(0x4_ffff_ffffn)).toBe(true);
    expect(adoptedLater(0x4_ffff_ffffn + 0x1_0000_0000n)).toBe(false); // high word larger, low word larger
    expect(adoptedLater(adopted)).toBe(false);
    expect(adoptedLater(0x5_0000_0000n)).toBe(true); // same high word, low word smaller
    expect(adoptedLater(0x6_0000_0000n)).toBe(false); // high word larger, low word smaller
  });

  it("is the burst a sweep marked only when both words of the time are the same", () => {
    const burst = new BurstIdentity().read(records(0x7_0000_0003n), L.size);
    expect(burst.openedAt(7, 3)).toBe(true);
    expect(burst.openedAt(7, 4)).toBe(false);
    expect(burst.openedAt(6, 3)).toBe(false);
    expect(burst.openedAt(0, 3)).toBe(false);
  });
});
