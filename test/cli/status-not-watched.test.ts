/**
 * `hive status` names the entries a full kernel watch map has no room for: the writer's watch
 * table lists every entry it synced, the pinned map only what fitted.
 */

import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { HivePolicy } from "../../api/policy.ts";
import { notWatched, renderUnarmed } from "../../runtime/cli/commands/status.ts";
import { planWatches, trapRefs } from "../../runtime/standalone/watch-plan.ts";
import { unarmedRecords } from "../../runtime/standalone/watch-table-file.ts";

const trap = {
  policy: "p",
  trapId: "t",
  path: "/etc/shadow",
  target: "default/web app (abc)",
  accesses: ["read"],
};

describe("hive status on a full watch map", () => {
  it("lists the table's entries the kernel map does not hold, matched by kind, device and inode", () => {
    const state = {
      pinRoot: "/sys/fs/bpf/hive",
      attachMode: "fentry" as const,
      maps: [],
      counters: null,
      watched: [{ key: { major: 8, minor: 1, ino: 10n }, slot: 1, mask: 4, kind: "file" as const }],
    };
    const table = {
      slots: [
        { slot: 1, kind: "file" as const, device: "8:1", inode: "10", traps: [trap] },
        // The same slot number on another file: a slot alone must not count as watched.
        { slot: 2, kind: "file" as const, device: "8:1", inode: "11", traps: [trap] },
        { slot: 3, kind: "parent" as const, device: "8:1", inode: "10", traps: [trap] },
      ],
    };
    expect(notWatched({ state, table } as unknown as Parameters<typeof notWatched>[0])).toEqual([
      table.slots[1],
      table.slots[2],
    ]);
  });
});

describe("hive status on traps that could not be armed", () => {
  it("names each with its error code and a message escaped and bounded", () => {
    const dir = mkdtempSync(join(tmpdir(), "hive-unarmed-"));
    const missing = join(dir, "no\u001b[31msuch\nfile");
    const policy = {
      apiVersion: "hive-operator.com/v1alpha1",
      kind: "HivePolicy",
      metadata: { name: "p" },
      spec: { traps: [{ path: missing }] },
    } as HivePolicy;
    const plan = planWatches(trapRefs([{ file: "p.yaml", index: 0, policy }]), { kernelId: "k" });
    const text = renderUnarmed(unarmedRecords(plan.unresolved)).join("\n");
    expect(text).toContain("NOT WATCHED 1 trap could not be armed");
    expect(text).toMatch(/p \S+ \(host\) {2}FileNotFound: /);
    expect(text).not.toContain("FileNotFound: FileNotFound");
    expect(text).not.toContain("\u001b");
    expect(text.split("\n")).toHaveLength(2);
  });
});
