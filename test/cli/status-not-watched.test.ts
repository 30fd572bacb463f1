/**
 * `hive status` names the entries a full kernel watch map has no room for: the writer's watch
 * table lists every entry it synced, the pinned map only what fitted.
 */
import { describe, expect, it } from "vitest";
import { notWatched } from "../../runtime/cli/commands/status.ts";

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
