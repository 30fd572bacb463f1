import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createProcReader, parseStatPpid } from "./proc-info.ts";

describe("procfs reader", () => {
  it("parses the parent pid after the last parenthesis, whatever the process calls itself", () => {
    expect(parseStatPpid("4242 (cat) R 17 4242 17 0 -1")).toBe(17);
    expect(parseStatPpid("4242 (evil) S 1 (x) R 99 4242) S 31337 1 1")).toBe(31337);
    expect(parseStatPpid("4242 (a b\nc) S 5 6")).toBe(5);
    expect(parseStatPpid("4242 (x) R -3 1")).toBeUndefined();
    expect(parseStatPpid("4242 no parens at all")).toBeUndefined();
    expect(parseStatPpid("4242 (x) R 99999999999 1")).toBeUndefined();
    expect(parseStatPpid("")).toBeUndefined();
  });

  it("reads exe and ppid of a live process from the real procfs", async () => {
    const child = spawn("sleep", ["5"], { stdio: "ignore" });
    try {
      await new Promise((r) => child.once("spawn", r));
      const info = createProcReader().read(child.pid as number, "sleep");
      expect(info.ppid).toBe(process.pid);
      expect(info.exe).toMatch(/sleep$/);
    } finally {
      child.kill();
    }
  });

  it("leaves the fields out for a process that is gone", () => {
    expect(createProcReader().read(2 ** 22 + 12345, "gone")).toEqual({});
  });

  it("keeps a hostile executable name as data and drops an unparsable stat, without a crash", () => {
    const root = mkdtempSync(join(tmpdir(), "hive-proc-"));
    try {
      mkdirSync(join(root, "77"));
      writeFileSync(join(root, "77", "stat"), "77 (x) R notanumber 1");
      symlinkSync("/bin/ev il\n(x) R 1", join(root, "77", "exe"));
      // A name with spaces and newlines is still just a string in JSON; the bad stat is dropped.
      expect(createProcReader({ procRoot: root }).read(77, "x")).toEqual({ exe: "/bin/ev il\n(x) R 1" });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
