/**
 * The resolution of one container's traps, and of the executables their allow entries name, in
 * one batch: its process is held open once, for one trip to a resolver thread.
 */
import type { Executable } from "../../api/data.ts";
import { HiveError } from "../../api/errors.ts";
import { type HiveTrap, parseMode } from "../../api/policy.ts";
import { exactAllowPaths } from "../alerts/allowlist.ts";
import type { ContainerFiles, FileResolver, ResolveOutcome } from "../discover/file-resolver.ts";
import type { ResolveOptions } from "../discover/safe-path.ts";
import type { Item } from "./discover-items.ts";
import { fileIdentity } from "./hive-data.ts";

/**
 * Resolves the traps of one container in one batch: its PID looked up and its process held
 * open once, one trip to a resolver thread however many traps match it. Every item gets its
 * outcome through `record`.
 */
export async function resolveContainer(
  resolver: FileResolver,
  containerId: string,
  group: readonly Item[],
  record: (item: Item, trap: HiveTrap, outcome: ResolveOutcome, executables: Executable[]) => void,
): Promise<void> {
  const work: { item: Item; trap: HiveTrap; options: ResolveOptions }[] = [];
  for (const item of group) {
    const trap = item.policy.spec.traps[item.trapIndex];
    if (!trap) continue;
    try {
      const options = trap.create
        ? { create: true, mode: trap.mode === undefined ? 0o444 : parseMode(trap.mode) }
        : {};
      work.push({ item, trap, options });
    } catch (error) {
      // Only parseMode throws here: a mode that is not octal or would escalate (admitted before the CRD refused it).
      const message = (error as Error).message;
      record(
        item,
        trap,
        { ok: false, error: new HiveError("PolicyInvalid", message, { object: trap.path }) },
        [],
      );
    }
  }
  // The exact executables the allow entries name, found in this container like a trapped path
  // (safe walk, proven): an entry holds only for those files (runtime/alerts/allowlist.ts).
  const exePaths = [...new Set(work.flatMap(({ trap }) => exactAllowPaths(trap)))];
  let outcomes: ResolveOutcome[];
  let exeOutcomes: ResolveOutcome[] = [];
  let files: ContainerFiles | undefined;
  try {
    files = await resolver.openContainer(containerId);
    const all = await files.resolveAll([
      ...work.map(({ trap, options }) => ({ path: trap.path, options })),
      ...exePaths.map((path) => ({ path, options: {} })),
    ]);
    outcomes = all.slice(0, work.length);
    exeOutcomes = all.slice(work.length);
  } catch (error) {
    outcomes = work.map(() => ({ ok: false, error }));
  } finally {
    files?.close();
  }
  const found = new Map<string, Executable>();
  exePaths.forEach((path, i) => {
    const outcome = exeOutcomes[i];
    // Reached through a symlink, the path is not the one the kernel records for the file: the entry
    // cannot hold for it, and the kernel's allow map decides by the file alone (allow-rules.ts).
    if (outcome?.ok && outcome.file.fileType === "file" && outcome.file.resolvedPath === path) {
      found.set(path, { path, ...fileIdentity(outcome.file.key) });
    }
  });
  work.forEach(({ item, trap }, i) => {
    const executables = exactAllowPaths(trap).flatMap((path) => found.get(path) ?? []);
    record(item, trap, outcomes[i] ?? { ok: false, error: undefined }, executables);
  });
}
