/**
 * Opening the trap program: picks the attach mode (attach.ts attachCandidates, "auto" by
 * default), falls back to the next mode when one cannot work here, and replaces the pins of
 * an agent of another version when asked to.
 */
import { existsSync, readdirSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { HiveError, isHiveError } from "../../api/errors.ts";
import { checkArchitecture } from "./architecture.ts";
import { attachCandidates, pinnedLinkMode, readKernelFacts } from "./attach.ts";
import { DEFAULT_PIN_ROOT } from "./bpffs.ts";
import { denyMechanisms, describeMechanism } from "./deny-mechanism.ts";
import { type KernelWatcherOptions, LibbpfKernelWatcher } from "./loader.ts";
import { countPinnedBacklog } from "./pinned-backlog.ts";

/** Errors that mean "this attach mode cannot work here": auto then tries the next one. */
const MODE_UNUSABLE = new Set([
  "KprobeUnsupported",
  "FentryUnsupported",
  "VerifierRejected",
  "PermissionDenied",
]);

/**
 * Opens, loads and (by default) attaches Hive's trap program. With attachMode "auto" (the
 * default) it tries the modes of attachCandidates in order and keeps the first that
 * attaches; the watcher says which one and why (attachMode, attachReason).
 */
export function openKernelWatcher(options: KernelWatcherOptions = {}): LibbpfKernelWatcher {
  try {
    return openInSomeMode(options);
  } catch (error) {
    const pinRoot = options.pinRoot === undefined ? DEFAULT_PIN_ROOT : options.pinRoot;
    if (!isHiveError(error, "PinsOfAnotherLayout") || !options.replaceStalePins || !pinRoot) throw error;
    // An upgrade changed a map's layout: watching with fresh maps beats staying blind. Removing
    // the pins detaches the old version's links (their pins were the last references). What the
    // old version left unread cannot be decoded by this one: counted first, not lost silently.
    const discarded = countPinnedBacklog(pinRoot);
    options.logger?.error(
      "replacing the pins of an agent of another map layout; its unread events are counted as lost",
      {
        pinRoot,
        ...discarded,
      },
    );
    for (const name of readdirSync(pinRoot)) unlinkSync(join(pinRoot, name));
    const watcher = openInSomeMode(options);
    watcher.upgradeDiscarded = BigInt(discarded.events + discarded.bursts);
    return watcher;
  }
}

function openInSomeMode(options: KernelWatcherOptions): LibbpfKernelWatcher {
  checkArchitecture();
  const facts = readKernelFacts();
  const pinRoot = options.pinRoot === undefined ? DEFAULT_PIN_ROOT : options.pinRoot;
  const pinned = pinRoot && existsSync(pinRoot) ? pinnedLinkMode(readdirSync(pinRoot)) : null;
  const candidates = attachCandidates(options.attachMode ?? "auto", facts, pinned);
  const refused: string[] = [];
  let firstPrivilegeError: HiveError | undefined;
  for (const [i, candidate] of candidates.entries()) {
    const reason = refused.length > 0 ? `${candidate.reason} (${refused.join("; ")})` : candidate.reason;
    try {
      const watcher = openWithDeny(options, { ...candidate, reason, facts });
      if (options.attach !== false) {
        options.logger?.info("kernel program attached", { attachMode: watcher.attachMode, reason });
      }
      return watcher;
    } catch (error) {
      if (!isHiveError(error) || !MODE_UNUSABLE.has(error.code)) throw error;
      if (error.code === "PermissionDenied") firstPrivilegeError ??= error;
      refused.push(`${candidate.mode}: ${error.message}`);
      if (i < candidates.length - 1) {
        options.logger?.info("attach mode unusable here, trying the next", {
          attachMode: candidate.mode,
          error: error.describe(),
        });
        continue;
      }
      if (candidates.length === 1) throw error;
      // A mode refused for privilege says what to grant; the others only that they do not exist here.
      const chosen = firstPrivilegeError ?? error;
      throw new HiveError(chosen.code, chosen.message, {
        ...chosen.details,
        object: chosen.object,
        hint: `${chosen.hint ?? ""} (tried: ${refused.join("; ")})`,
      });
    }
  }
  throw new HiveError("KprobeUnsupported", "no attach mode to try", { object: "inode_permission" });
}

/**
 * The watcher with a deny program, by the best mechanism this kernel offers (deny-mechanism.ts),
 * or, when the program with neither loads here (a kernel without BPF trampolines refuses
 * fmod_ret), without one: denying traps then only alert, and the watcher says why (denyState).
 * An error that is not the deny program's recurs without it.
 */
function openWithDeny(
  options: KernelWatcherOptions,
  choice: ConstructorParameters<typeof LibbpfKernelWatcher>[1],
): LibbpfKernelWatcher {
  if (options.denyUnavailable !== undefined) return new LibbpfKernelWatcher(options, choice);
  const { order, note } = denyMechanisms(options.lsmFile);
  const refused: string[] = note ? [note] : [];
  for (const mechanism of order) {
    try {
      const watcher = new LibbpfKernelWatcher({ ...options, denyMechanism: mechanism }, choice);
      if (refused.length > 0)
        options.logger?.info(`denying through ${describeMechanism(mechanism)}`, { why: refused });
      return watcher;
    } catch (error) {
      refused.push(
        `the program with ${describeMechanism(mechanism)} did not load: ${isHiveError(error) ? error.describe() : String(error)}`,
      );
    }
  }
  const reason = refused.join("; ");
  const watcher = new LibbpfKernelWatcher({ ...options, denyUnavailable: reason }, choice);
  options.logger?.error("this kernel cannot deny: denying traps only alert here", { reason });
  return watcher;
}
