/**
 * The kernel links one watcher holds: the trap link (attached, or adopted from an earlier
 * agent's pin), the parent hook and the change hooks. Attaches them, reports what is missing
 * and what the kernel skipped, and releases them (trap-link.ts does the attaching itself).
 */
import { closeSync } from "node:fs";
import type { Logger } from "../log.ts";
import { ATTACH_PROGRAMS, CHANGE_HOOKS, type ChangeHook, type KernelFacts } from "./attach.ts";
import type { AttachMode } from "./contract.ts";
import { type Libbpf, type Pointer, releaseLink } from "./libbpf-ffi.ts";
import { programInfo } from "./program-info.ts";
import { attachChangeLink, attachParentLink, attachTrapLink } from "./trap-link.ts";

export type ProgramReplaced = { from: string; to: string; failed?: string };

export interface WatcherLinksContext {
  lib: Libbpf;
  mode: AttachMode;
  pinRoot: string | null;
  facts: KernelFacts;
  logger: Logger | undefined;
  /** The loaded object's program of this name. */
  program: (name: string) => Pointer;
}

export class WatcherLinks {
  private readonly ctx: WatcherLinksContext;
  private link: Pointer | null = null;
  /** The link was attached by this watcher, not adopted from a pin. */
  private ownsLink = false;
  /** The adopted link's program (pinned by the agent that attached it); -1 when it is ours. */
  runningProgramFd = -1;
  programReplaced: ProgramReplaced | undefined;
  parentLink: Pointer | null = null;
  /** The parent hook this kernel needs did not attach (readiness says so). */
  private parentHookMissing = false;
  /**
   * The change hooks attached (attach.ts CHANGE_HOOKS), by hook name: a trapped file deleted,
   * renamed, replaced or truncated is reported on its own slot. A missing one makes readiness fail.
   */
  private readonly changeLinks = new Map<string, Pointer>();
  private readonly changeHooksMissing: ChangeHook[] = [];

  constructor(ctx: WatcherLinksContext) {
    this.ctx = ctx;
  }

  /** Attaches the trap program, or adopts (or replaces) what an earlier agent pinned. True when adopted. */
  attachTrap(prog: Pointer, programFd: number): boolean {
    const { lib, mode, pinRoot, facts, logger } = this.ctx;
    const trap = attachTrapLink({ lib, mode, pinRoot, prog, programFd, facts, logger });
    this.link = trap.link;
    this.ownsLink = trap.owned;
    this.runningProgramFd = trap.runningProgramFd;
    this.programReplaced = trap.replaced;
    return trap.adopted;
  }

  /** Attaches the parent hook this kernel needs; one that does not attach makes readiness fail. */
  attachParentHook(): void {
    const { lib, mode, pinRoot, logger } = this.ctx;
    this.parentLink = attachParentLink({
      lib,
      mode,
      pinRoot,
      prog: this.ctx.program(ATTACH_PROGRAMS[mode].parent),
      logger,
    });
    this.parentHookMissing = this.parentLink === null;
  }

  attachChangeHooks(): void {
    const { lib, mode, pinRoot, logger } = this.ctx;
    for (const hook of CHANGE_HOOKS) {
      const link = attachChangeLink(
        { lib, mode, pinRoot, prog: this.ctx.program(hook.programs[mode]), logger },
        hook,
      );
      if (link) this.changeLinks.set(hook.name, link);
      else this.changeHooksMissing.push(hook);
    }
  }

  /** True when every change hook is attached. */
  get allChangeHooks(): boolean {
    return this.changeLinks.size === CHANGE_HOOKS.length;
  }

  /** The hooks that did not attach, as a readiness message; undefined when none is missing. */
  missingMessage(): string | undefined {
    if (this.parentHookMissing)
      return "the parent-directory hook did not attach: a trapped file replaced or renamed is noticed only when its trap is resolved again";
    if (this.changeHooksMissing.length > 0)
      return this.changeHooksMissing
        .map((hook) => `the hook on ${hook.symbol} did not attach: ${hook.without}`)
        .join("; ");
    return undefined;
  }

  /** The fd of the program the trap link runs: the adopted one's, else ours. */
  trapProgramFd(programFd: number): number {
    return this.runningProgramFd >= 0 ? this.runningProgramFd : programFd;
  }

  /** Runs of the trap and parent programs the kernel skipped (recursion; kprobes since 6.7). */
  programMisses(programFd: number): bigint {
    const { lib, mode, program } = this.ctx;
    let total = 0n;
    total += programInfo(this.trapProgramFd(programFd)).misses ?? 0n;
    if (this.parentLink) {
      const fd = lib.bpf_program__fd(program(ATTACH_PROGRAMS[mode].parent)) as number;
      total += programInfo(fd).misses ?? 0n;
    }
    for (const hook of CHANGE_HOOKS) {
      if (!this.changeLinks.has(hook.name)) continue;
      const fd = lib.bpf_program__fd(program(hook.programs[mode])) as number;
      total += programInfo(fd).misses ?? 0n;
    }
    return total;
  }

  /**
   * After a failed load: a link attached before a later step failed must not stay behind,
   * reporting into maps nobody reads (and, with another mode attached next, reporting twice).
   */
  destroyAttached(): void {
    const { lib, pinRoot } = this.ctx;
    for (const link of this.changeLinks.values()) {
      if (pinRoot) lib.bpf_link__unpin(link);
      lib.bpf_link__destroy(link);
    }
    if (this.link && this.ownsLink) {
      if (pinRoot) lib.bpf_link__unpin(this.link);
      lib.bpf_link__destroy(this.link);
    }
  }

  /** Releases every link (kept pinned when `keep`) and the adopted program's fd. */
  release(keep: boolean): void {
    for (const link of [this.parentLink, ...this.changeLinks.values(), this.link])
      if (link) releaseLink(this.ctx.lib, link, keep);
    if (this.runningProgramFd >= 0) closeSync(this.runningProgramFd);
  }
}
