import { readFileSync, statSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  accessesFromMask,
  fileKeyFromStat,
  kernelDev,
  keyFromKernelDev,
  maskFromAccesses,
} from "./layout.ts";

describe("device numbers", () => {
  it("converts st_dev to the major:minor the kernel lists in mountinfo", () => {
    // mountinfo field 3 is the superblock's major:minor, i.e. what s_dev encodes.
    const line = readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .find((l) => l.split(" ")[4] === "/");
    const [major, minor] = (line?.split(" ")[2] ?? "").split(":").map(Number);
    const key = fileKeyFromStat(statSync("/"));
    expect({ major: key.major, minor: key.minor }).toEqual({ major, minor });
  });

  it("decodes a character device's rdev the way glibc does", () => {
    expect(fileKeyFromStat({ dev: statSync("/dev/null").rdev, ino: 0 })).toMatchObject({
      major: 1,
      minor: 3,
    });
  });

  it("handles majors and minors beyond 8 bits (glibc's split encoding)", () => {
    // gnu_dev_makedev(259, 70000): minor low 8 bits, major bits 8-19, minor high bits 20-31
    const dev = (70000 & 0xff) | ((259 & 0xfff) << 8) | ((70000 & ~0xff) << 12);
    const key = fileKeyFromStat({ dev: dev >>> 0, ino: 5 });
    expect(key).toEqual({ major: 259, minor: 70000, ino: 5n });
    expect(keyFromKernelDev(kernelDev(key), 5n)).toEqual(key);
  });
});

describe("access masks", () => {
  it("maps kinds to MAY_* bits and back", () => {
    expect(maskFromAccesses(["read", "open"])).toBe(0x24);
    expect(accessesFromMask(0x24 | 0x80)).toEqual(["read", "open"]);
    expect(accessesFromMask(maskFromAccesses(["read", "write", "exec", "append", "open"]))).toEqual([
      "read",
      "write",
      "exec",
      "append",
      "open",
    ]);
  });
});
