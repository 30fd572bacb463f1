import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { HiveData } from "../../api/data.ts";
import { LABEL_POLICY_NAMESPACE, LABEL_TRAP_ID } from "../../api/meta.ts";
import { renderUnarmed } from "../cli/commands/status.ts";
import type { WatchEntry } from "../kernel/contract.ts";
import { createLogger } from "../log.ts";
import { readWatchTableFile } from "../standalone/watch-table-file.ts";
import { agentTableRecords, createAgentWatchTable } from "./watch-table.ts";

const data = (pod: string, container: string): HiveData => ({
  apiVersion: "hive-operator.com/v1alpha1",
  kind: "HiveData",
  metadata: {
    name: `d-${pod}`,
    // In the monitor's namespace; the pod's is an annotation.
    namespace: "hive-system",
    labels: { [LABEL_TRAP_ID]: "t1", [LABEL_POLICY_NAMESPACE]: "security" },
    annotations: {
      namespace: "shop",
      hive_policy_name: "shadow",
      path: "/etc/shadow",
      pod_name: pod,
      container_name: "app",
      container_id: container,
    },
  },
  spec: {
    "inode-no": 77,
    "kernel-id": "aaaaaaaa-1111-4111-8111-111111111111",
    device: { major: 0, minor: 42 },
    accesses: ["read"],
  },
});

const entries: WatchEntry[] = [
  { slot: 2, kind: "parent", key: { major: 0, minor: 42, ino: 12n }, accesses: ["write"] },
  { slot: 1, kind: "file", key: { major: 0, minor: 42, ino: 77n }, accesses: ["read"] },
];
const bySlot = new Map([
  [1, [data("web-1", "containerd://0123456789abcdef0123"), data("web-2", "fedcba9876543210")]],
  [2, [data("web-1", "containerd://0123456789abcdef0123")]],
]);
const dataOf = (slot: number) => bySlot.get(slot) ?? [];

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe("the agent's watch table", () => {
  it("names each slot's traps from the HiveData behind it, in slot order", () => {
    const records = agentTableRecords(entries, dataOf);
    expect(records.map((r) => [r.slot, r.kind, r.device, r.inode])).toEqual([
      [1, "file", "0:42", "77"],
      [2, "parent", "0:42", "12"],
    ]);
    expect(records[0]?.traps).toEqual([
      {
        policy: "shadow",
        namespace: "security",
        trapId: "t1",
        path: "/etc/shadow",
        target: "shop/web-1 app (0123456789ab)",
        accesses: ["read"],
      },
      expect.objectContaining({ target: "shop/web-2 app (fedcba987654)" }),
    ]);
  });

  it("writes the latest table, and removes it when the kernel program is closed", async () => {
    dir = mkdtempSync(join(tmpdir(), "hive-table-"));
    const file = join(dir, "hive.watch-table.json");
    const table = createAgentWatchTable({
      file,
      kernelId: "aaaaaaaa-1111-4111-8111-111111111111",
      attachMode: "kprobe",
      logger: createLogger({}, { level: "error" }),
    });
    table.synced([], dataOf);
    table.synced(entries, dataOf); // coalesced: the last one wins
    await table.idle();
    const written = await readWatchTableFile(file);
    expect(written).toMatchObject({ writer: "agent", pid: process.pid, attachMode: "kprobe" });
    expect(written?.slots.map((r) => r.slot)).toEqual([1, 2]);
  });

  it("logs a failed write instead of failing the loader", async () => {
    dir = mkdtempSync(join(tmpdir(), "hive-table-"));
    const blocker = join(dir, "not-a-directory");
    writeFileSync(blocker, "");
    const lines: string[] = [];
    const table = createAgentWatchTable({
      file: join(blocker, "hive.watch-table.json"),
      kernelId: "aaaaaaaa-1111-4111-8111-111111111111",
      attachMode: "kprobe",
      logger: createLogger({}, { level: "warn", sink: (line: string) => lines.push(line) }),
    });
    table.synced(entries, dataOf);
    await table.idle();
    expect(lines.join("\n")).toContain("cannot update the watch table");
  });

  it("lists the traps discover could not arm beside the slots, for hive status", async () => {
    dir = mkdtempSync(join(tmpdir(), "hive-table-"));
    const file = join(dir, "hive.watch-table.json");
    const table = createAgentWatchTable({
      file,
      kernelId: "aaaaaaaa-1111-4111-8111-111111111111",
      attachMode: "fentry",
      logger: createLogger({}, { level: "error" }),
    });
    table.synced(entries, dataOf);
    table.unarmed([
      {
        policyNamespace: "security",
        policyName: "shadow",
        trapId: "0123456789abcdef",
        node: "n1",
        pod: "web-1",
        container: "app",
        reason: "TrapNotProven",
        message:
          "TrapNotProven: the kernel program saw no check of /etc/shadow: it cannot be watched (/etc/shadow)",
      },
    ]);
    await table.idle();
    const written = await readWatchTableFile(file);
    expect(written?.slots.map((r) => r.slot)).toEqual([1, 2]); // the slots are kept
    const text = renderUnarmed(written?.unarmed ?? []).join("\n");
    expect(text).toContain("NOT WATCHED 1 trap could not be armed");
    expect(text).toContain(
      "security/shadow trap 0123456789ab (web-1 app)  TrapNotProven: the kernel program",
    );
  });
});
