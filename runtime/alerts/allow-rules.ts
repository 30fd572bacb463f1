/**
 * A trap's allow list as the kernel decides it (bpf/allow.bpf.h): the entries it can decide and,
 * per executable file an entry names, which entries name it. The kernel then lets an allowed check
 * through without an event; what it cannot decide (a `*` pattern, an entry past the first
 * ALLOW_ENTRIES, a file discover did not find) reaches user space, which decides as before
 * (allowlist.ts). Only exact paths are decided in the kernel, by the file's identity: discover
 * records an executable only when its path leads to it through no symlink, so that the identity
 * stands for that path (resolve-container.ts).
 */
import type { AllowEntry } from "../../api/policy.ts";
import type { AllowRule, KernelWatcher } from "../kernel/contract.ts";
import { ALLOW_ANY, ALLOW_ENTRIES, fileKeyId, maskFromAccesses } from "../kernel/layout.ts";
import type { AllowScope } from "./allowlist.ts";

const exact = (path: string | undefined) =>
  path === undefined || (path.startsWith("/") && !path.includes("*"));

/** The rules of the trap watched at `slot` (one per executable file); none when the kernel can allow nothing. */
export function allowRulesFor(
  slot: number,
  allow: readonly AllowEntry[] | undefined,
  scope: AllowScope,
): AllowRule[] {
  const shared = { needsExe: 0, needsParent: 0, decided: 0, kinds: new Array<number>(ALLOW_ENTRIES).fill(0) };
  const byFile = new Map<string, AllowRule>();
  const name = (path: string | undefined, bit: number, role: "exe" | "parent") => {
    if (path === undefined) return;
    for (const file of scope.files?.get(path) ?? []) {
      const id = fileKeyId(file);
      const rule = byFile.get(id) ?? { slot, file, exe: 0, parent: 0, host: scope.host === true, ...shared };
      rule[role] = (rule[role] | bit) >>> 0;
      byFile.set(id, rule);
    }
  };
  (allow ?? []).slice(0, ALLOW_ENTRIES).forEach((entry, i) => {
    const exe = entry.exe;
    const parent = entry["parent-exe"];
    if ((exe === undefined && parent === undefined) || !exact(exe) || !exact(parent)) return;
    const bit = (1 << i) >>> 0;
    shared.decided = (shared.decided | bit) >>> 0;
    if (exe !== undefined) shared.needsExe = (shared.needsExe | bit) >>> 0;
    if (parent !== undefined) shared.needsParent = (shared.needsParent | bit) >>> 0;
    shared.kinds[i] = entry.accesses === undefined ? ALLOW_ANY : maskFromAccesses(entry.accesses);
    name(exe, bit, "exe");
    name(parent, bit, "parent");
  });
  // The entries' words were filled after some files were first named: every rule reads them now.
  return [...byFile.values()].map((rule) => ({ ...rule, ...shared, kinds: [...shared.kinds] }));
}

/** The watch entry's `allow` for these rules: undefined when there are none. */
export function allowFlagOf(rules: readonly AllowRule[]): { parent: boolean } | undefined {
  if (rules.length === 0) return undefined;
  return { parent: rules.some((r) => r.parent !== 0) };
}

/**
 * Hands what the kernel allowed since the last take to `add`, per entry, under the owner of each
 * slot as the rules were last written; a slot with no owner (an earlier numbering) is skipped.
 */
export function takeAllowed<T>(
  kernel: Pick<KernelWatcher, "takeAllowed">,
  ownerOf: (slot: number) => T | undefined,
  add: (owner: T, entry: number, count: number) => void,
): void {
  for (const { slot, counts } of kernel.takeAllowed?.() ?? []) {
    const owner = ownerOf(slot);
    if (owner === undefined) continue;
    counts.forEach((count, entry) => {
      if (count > 0n) add(owner, entry, Number(count));
    });
  }
}
