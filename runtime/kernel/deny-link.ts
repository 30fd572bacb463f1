/**
 * The deny program's link (bpf/hive.bpf.c hive_deny_lsm or hive_deny, deny-mechanism.ts):
 * attached only while some watch entry denies, so that a node without denying traps pays nothing
 * for it. Pinned (`link_deny`), it keeps denying while no agent runs (a restart, an upgrade): the
 * next agent keeps an earlier agent's link until its own first sync says whether to deny, then
 * attaches its own before detaching the old one (no gap), or detaches it. An uninstall detaches
 * it with the rest.
 */
import { join } from "node:path";
import koffi from "koffi";
import type { Logger } from "../log.ts";
import type { DenyState } from "./contract.ts";
import { type DenyMechanism, describeMechanism } from "./deny-mechanism.ts";
import {
  detachLink,
  errnoName,
  type Libbpf,
  openPinnedLink,
  type Pointer,
  releaseLink,
} from "./libbpf-ffi.ts";

export const DENY_LINK_PIN = "link_deny";

export class DenyLink {
  private own: Pointer | null = null;
  /** An earlier agent's pinned link, kept until this agent's first sync decides. */
  private earlier: Pointer | null;
  private failure: string | undefined;

  private readonly lib: Libbpf;
  /** The loaded deny program and its mechanism; null when this kernel could load neither. */
  private readonly prog: { mechanism: DenyMechanism; prog: Pointer } | null;
  private readonly pinRoot: string | null;
  private readonly logger: Logger | undefined;

  constructor(
    lib: Libbpf,
    prog: { mechanism: DenyMechanism; prog: Pointer } | null,
    pinRoot: string | null,
    logger: Logger | undefined,
    unavailable?: string,
  ) {
    this.lib = lib;
    this.prog = prog;
    this.pinRoot = pinRoot;
    this.logger = logger;
    this.failure = unavailable;
    this.earlier = pinRoot ? openPinnedLink(join(pinRoot, DENY_LINK_PIN)) : null;
  }

  /** Attaches or detaches so that accesses are refused exactly when `wanted`. */
  set(wanted: boolean): void {
    if (wanted && !this.own) this.attach();
    if (!wanted && this.own) {
      detachLink(this.lib, this.own);
      this.own = null;
      this.logger?.info("no trap denies on this kernel any more: the deny program is detached", {});
    }
    if (this.earlier && (this.own || !wanted)) {
      // This agent's own link (or no deny at all) takes over from what an earlier agent left.
      detachLink(this.lib, this.earlier);
      this.earlier = null;
    }
  }

  state(): DenyState {
    if (this.failure !== undefined) return { available: false, reason: this.failure };
    const mechanism = this.prog?.mechanism ?? "fmod_ret";
    return { available: true, attached: this.own !== null || this.earlier !== null, mechanism };
  }

  /** Ends this agent's hold; the pinned link stays attached unless `detach` (an uninstall). */
  close(options: { detach: boolean }): void {
    for (const link of [this.own, this.earlier]) if (link) releaseLink(this.lib, link, !options.detach);
    this.own = null;
    this.earlier = null;
  }

  private attach(): void {
    // Tried once per agent: a kernel that refused it refuses every sync (the next agent tries again).
    if (!this.prog || this.failure !== undefined) return;
    const link = this.lib.bpf_program__attach(this.prog.prog) as Pointer | null;
    if (!link) {
      this.failure = `attaching ${describeMechanism(this.prog.mechanism)} failed: ${errnoName(-koffi.errno())}`;
      this.logger?.error("this kernel cannot deny: denying traps only alert here", { reason: this.failure });
      return;
    }
    this.own = link;
    this.failure = undefined;
    if (!this.pinRoot) return;
    const path = join(this.pinRoot, DENY_LINK_PIN);
    if (this.earlier) {
      detachLink(this.lib, this.earlier); // unpins it: this agent's link takes its place
      this.earlier = null;
    }
    const pinned = this.lib.bpf_link__pin(link, path) as number;
    if (pinned < 0)
      this.logger?.warn("the deny program's link cannot be pinned: it ends with the agent", {
        errno: errnoName(pinned),
      });
  }
}
