/** `hive status` says what the kernel refuses: the deny link, the denying entries, the refusals. */
import { describe, expect, it } from "vitest";
import { denySummary } from "../../runtime/cli/commands/status.ts";
import { ACTIONS } from "../../runtime/kernel/layout.ts";

const entry = (ino: bigint, action: number) => ({
  key: { major: 0, minor: 40, ino },
  slot: Number(ino),
  mask: 4,
  kind: "file" as const,
  group: 0,
  action,
  flags: 0,
});
const counters = {
  events: 3n,
  lost: 0n,
  checks: 3n,
  bursts: 3n,
  unfolded: 0n,
  quiet: 0n,
  denied: 7n,
  allowed: 0n,
};

describe("hive status on a kernel that denies", () => {
  it("shows the link, the files denied and dry run, and the accesses refused", () => {
    const watched = [entry(1n, ACTIONS.deny), entry(2n, ACTIONS.dryRun), entry(3n, ACTIONS.alert)];
    expect(
      denySummary({ pinRoot: "/p", attachMode: "fentry", denyAttached: true, maps: [], watched, counters }),
    ).toBe("attached (link_deny) · 1 file denied, 1 dry run · refused 7");
    // The mechanism, where the kernel's link says it.
    expect(
      denySummary({
        pinRoot: "/p",
        attachMode: "fentry",
        denyAttached: true,
        denyMechanism: "bpf-lsm",
        maps: [],
        watched,
        counters,
      }),
    ).toBe(
      "attached (link_deny, the BPF LSM's inode_permission hook) · 1 file denied, 1 dry run · refused 7",
    );
  });

  it("says so loudly when entries deny and no link is attached, and says nothing when no trap denies", () => {
    const state = { pinRoot: "/p", attachMode: "fentry" as const, maps: [], counters: null };
    expect(denySummary({ ...state, denyAttached: false, watched: [entry(1n, ACTIONS.deny)] })).toBe(
      "NOT ATTACHED: denying entries are only alerted · 1 file denied, 0 dry run",
    );
    expect(denySummary({ ...state, denyAttached: false, watched: [entry(1n, ACTIONS.alert)] })).toBe("");
  });
});
