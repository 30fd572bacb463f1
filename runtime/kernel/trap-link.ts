/**
 * The trap program's link: attached, or adopted from the pin an earlier agent left — when it runs
 * this very program. An earlier agent's link that runs another build is replaced: this build is
 * attached first and the old link detached after, so no check goes unseen (in between both run
 * and fold into the same bursts: they share the maps). BPF_LINK_UPDATE would swap atomically,
 * but tracing and kprobe links do not support it. The program is pinned beside the link: its
 * tag is what the next agent compares its own with.
 */
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import koffi from "koffi";
import type { Logger } from "../log.ts";
import {
  ATTACH_SYMBOLS,
  attachError,
  type ChangeHook,
  changeLinkPinName,
  type KernelFacts,
  linkPinName,
  PROGRAM_PIN,
  parentLinkPinName,
} from "./attach.ts";
import { ATTACH_MODES, type AttachMode } from "./contract.ts";
import { detachLink, errnoName, type Libbpf, openPinnedLink, type Pointer } from "./libbpf-ffi.ts";
import { pinnedProgramInfo, programInfo } from "./program-info.ts";

/** struct bpf_kprobe_multi_opts of libbpf 1.x: five 8-byte fields and a bool, padded to 8. */
const KPROBE_MULTI_OPTS_SIZE = 48;

/** Attaches `prog` to `symbol` in `mode`; null with errno set on failure. */
export function attachProgram(lib: Libbpf, mode: AttachMode, prog: Pointer, symbol: string): Pointer | null {
  if (mode !== "kprobe.multi") return lib.bpf_program__attach(prog) as Pointer | null;
  // By symbol name, resolved by the kernel: libbpf's pattern form would read addresses
  // from /proc/kallsyms, which a container without CAP_SYSLOG sees as zeros.
  return lib.bpf_program__attach_kprobe_multi_opts(prog, null, {
    sz: KPROBE_MULTI_OPTS_SIZE,
    syms: [symbol],
    addrs: null,
    cookies: null,
    cnt: 1,
    retprobe: false,
  }) as Pointer | null;
}

export interface TrapLinkContext {
  lib: Libbpf;
  mode: AttachMode;
  pinRoot: string | null;
  prog: Pointer;
  programFd: number;
  facts: KernelFacts;
  logger: Logger | undefined;
}

export interface TrapLink {
  link: Pointer;
  /** Attached by this agent (not adopted). */
  owned: boolean;
  adopted: boolean;
  /** The adopted link's program, opened from its pin; -1 when the link runs this agent's. */
  runningProgramFd: number;
  /** The build this agent replaced (or failed to: `failed` says why, and the old one runs on). */
  replaced?: { from: string; to: string; failed?: string };
}

export function attachTrapLink(ctx: TrapLinkContext): TrapLink {
  const { lib, mode, pinRoot, prog, logger } = ctx;
  const linkPath = pinRoot ? join(pinRoot, linkPinName(mode)) : null;
  const progPath = pinRoot ? join(pinRoot, PROGRAM_PIN) : null;
  const mine = programInfo(ctx.programFd).tag;
  const pin = (link: Pointer) => {
    if (linkPath && progPath) pinLink(lib, link, linkPath, ctx.programFd, progPath, logger);
  };
  if (linkPath && progPath) {
    const link = openPinnedLink(linkPath);
    if (link) {
      const running = pinnedProgramInfo(progPath)?.tag;
      if (running === mine) {
        logger?.info("adopted pinned BPF link", { path: linkPath, program: mine });
        return { link, owned: false, adopted: true, runningProgramFd: lib.bpf_obj_get(progPath) as number };
      }
      const from = running ?? "unknown";
      const fresh = attachProgram(lib, mode, prog, ATTACH_SYMBOLS.trap);
      if (!fresh) {
        // The earlier build keeps watching: better than a gap; said, and tried again at the next start.
        const failed = errnoName(-koffi.errno());
        logger?.error("cannot attach this build's program; an earlier build keeps running", {
          running: from,
          wanted: mine,
          errno: failed,
        });
        return {
          link,
          owned: false,
          adopted: true,
          runningProgramFd: -1,
          replaced: { from, to: mine, failed },
        };
      }
      detachLink(lib, link);
      pin(fresh);
      logger?.info("replaced the program an earlier agent left running", { from, to: mine });
      return { link: fresh, owned: true, adopted: false, runningProgramFd: -1, replaced: { from, to: mine } };
    }
  }
  if (pinRoot) {
    // A link an earlier agent pinned in another mode would report every access twice.
    for (const other of ATTACH_MODES) {
      const stale = join(pinRoot, linkPinName(other));
      if (other === mode || !existsSync(stale)) continue;
      const old = openPinnedLink(stale);
      if (old) {
        detachLink(lib, old);
        logger?.info("detached a pinned link of another attach mode", { path: stale });
      }
    }
  }
  const link = attachProgram(lib, mode, prog, ATTACH_SYMBOLS.trap);
  if (!link) throw attachError(mode, koffi.errno(), ctx.facts);
  pin(link);
  return { link, owned: true, adopted: false, runningProgramFd: -1 };
}

/** Pins the link and the program it runs. */
function pinLink(
  lib: Libbpf,
  link: Pointer,
  linkPath: string,
  programFd: number,
  progPath: string,
  logger: Logger | undefined,
): void {
  const pinned = lib.bpf_link__pin(link, linkPath) as number;
  // Legacy perf-event kprobe links (before 5.15) cannot be pinned: the maps still are.
  if (pinned < 0) {
    logger?.warn("BPF link not pinnable on this kernel", { errno: errnoName(pinned) });
    return;
  }
  rmSync(progPath, { force: true });
  const rc = lib.bpf_obj_pin(programFd, progPath) as number;
  if (rc < 0) logger?.warn("cannot pin the trap program", { path: progPath, errno: errnoName(rc) });
}

/**
 * The parent-directory hook (kernels whose inode_permission is split), attached anew and pinned
 * in place of an earlier agent's (attached first, the old one detached after: no gap), so that a
 * trapped file renamed or replaced while no agent runs is still reported. A perf-event kprobe
 * link cannot be pinned before 5.15: it then ends with the agent. Null when it cannot attach.
 */
export function attachParentLink(
  ctx: Pick<TrapLinkContext, "lib" | "mode" | "pinRoot" | "prog" | "logger">,
): Pointer | null {
  return attachHookLink(ctx, {
    what: "the parent-directory hook",
    symbol: ATTACH_SYMBOLS.parent,
    pinName: parentLinkPinName,
  });
}

/**
 * A change hook (attach.ts CHANGE_HOOKS), attached and pinned like the parent-directory hook: a
 * trapped file deleted or replaced while no agent runs is reported to the next one.
 */
export function attachChangeLink(
  ctx: Pick<TrapLinkContext, "lib" | "mode" | "pinRoot" | "prog" | "logger">,
  hook: ChangeHook,
): Pointer | null {
  return attachHookLink(ctx, {
    what: `the ${hook.name} hook`,
    symbol: hook.symbol,
    pinName: (mode) => changeLinkPinName(hook, mode),
  });
}

/** Attaches `prog` to `hook.symbol`, then detaches what earlier agents pinned for it (no gap), and pins it. */
function attachHookLink(
  ctx: Pick<TrapLinkContext, "lib" | "mode" | "pinRoot" | "prog" | "logger">,
  hook: { what: string; symbol: string; pinName: (mode: AttachMode) => string },
): Pointer | null {
  const { lib, mode, pinRoot, logger } = ctx;
  const link = attachProgram(lib, mode, ctx.prog, hook.symbol);
  if (!link) {
    logger?.warn(`cannot attach ${hook.what}`, { symbol: hook.symbol, errno: errnoName(koffi.errno()) });
    return null;
  }
  if (!pinRoot) return link;
  // An earlier agent's, in this mode or another (which would report every change twice).
  for (const other of ATTACH_MODES) {
    const earlier = openPinnedLink(join(pinRoot, hook.pinName(other)));
    if (earlier) detachLink(lib, earlier);
  }
  const pinned = lib.bpf_link__pin(link, join(pinRoot, hook.pinName(mode))) as number;
  if (pinned < 0)
    logger?.warn(`${hook.what} cannot be pinned on this kernel: it ends with the agent`, {
      errno: errnoName(pinned),
    });
  return link;
}
