/**
 * Process identity in the kernel (bpf/process.bpf.h): attaches the exec, fork and exit
 * trackers through BPF links pinned beside the maps, so that they stay attached while no agent
 * runs and no exec goes unseen while it restarts; seeds the processes that predate the trackers
 * with a task iterator; and walks a process's ancestors in the pinned process map.
 */
import { closeSync, readSync } from "node:fs";
import { join } from "node:path";
import koffi from "koffi";
import { MAX_ANCESTORS } from "../../api/alert.ts";
import { HiveError } from "../../api/errors.ts";
import type { Logger } from "../log.ts";
import type { Ancestor, ProcessIdentity } from "./contract.ts";
import { decodeProc, PROC_LAYOUT } from "./layout.ts";
import {
  check,
  detachLink,
  errnoName,
  type Libbpf,
  openPinnedLink,
  type Pointer,
  releaseLink,
} from "./libbpf-ffi.ts";

/** The tracker programs and the names their links are pinned under. */
export const TRACKERS = [
  { program: "hive_proc_exec", pin: "link_proc_exec" },
  { program: "hive_proc_fork", pin: "link_proc_fork" },
  { program: "hive_proc_exit", pin: "link_proc_exit" },
] as const;
export const SEED_PROGRAM = "hive_proc_seed";

export class ProcessTracking {
  private readonly links: Pointer[] = [];
  private readonly lib: Libbpf;
  private readonly program: (name: string) => Pointer;
  private readonly pinRoot: string | null;
  private readonly procsFd: number;
  private readonly logger: Logger | undefined;

  constructor(
    lib: Libbpf,
    program: (name: string) => Pointer,
    pinRoot: string | null,
    procsFd: number,
    logger?: Logger,
  ) {
    this.lib = lib;
    this.program = program;
    this.pinRoot = pinRoot;
    this.procsFd = procsFd;
    this.logger = logger;
  }

  /**
   * Attaches the trackers, each in place of the one an earlier agent pinned (attached first, the
   * old one detached after: no exec goes unseen, and an upgrade runs this build's trackers; for
   * that instant both write the same entries), then seeds what they have not seen.
   */
  start(): void {
    for (const { program, pin } of TRACKERS) {
      const path = this.pinRoot ? join(this.pinRoot, pin) : null;
      const earlier = path ? openPinnedLink(path) : null;
      const link = this.lib.bpf_program__attach(this.program(program)) as Pointer | null;
      if (!link && earlier) {
        // The earlier build's tracker keeps running: better than none.
        this.logger?.error("cannot attach this build's process tracker; an earlier build's keeps running", {
          program,
          errno: errnoName(koffi.errno()),
        });
        this.links.push(earlier);
        continue;
      }
      if (earlier) {
        detachLink(this.lib, earlier);
      }
      if (!link) {
        const errno = koffi.errno();
        throw new HiveError(
          "BpfCallFailed",
          `cannot attach the process tracker ${program}: ${errnoName(errno)}`,
          {
            object: program,
            hint: "process tracking needs raw tracepoints (Linux 4.17+) and CAP_BPF + CAP_PERFMON",
          },
        );
      }
      this.links.push(link);
      if (path)
        check(this.lib.bpf_link__pin(link, path) as number, "pinning a process tracker", { object: path });
    }
    this.seed();
  }

  /**
   * Runs the task iterator once: every process the trackers have no entry for gets one,
   * marked as seeded. The iterator writes nothing; reading its descriptor to the end runs it.
   */
  private seed(): void {
    const link = this.lib.bpf_program__attach_iter(this.program(SEED_PROGRAM), null) as Pointer | null;
    if (!link) {
      // Without a seed, processes older than the program are reported with an unknown
      // executable: louder, never wrong.
      this.logger?.warn("cannot seed processes that predate the program", {
        errno: errnoName(koffi.errno()),
      });
      return;
    }
    try {
      const fd = check(
        this.lib.bpf_iter_create(this.lib.bpf_link__fd(link) as number) as number,
        "running the process seed iterator",
        { object: SEED_PROGRAM },
      );
      const chunk = Buffer.alloc(4096);
      try {
        while (readSync(fd, chunk) > 0);
      } finally {
        closeSync(fd);
      }
    } finally {
      this.lib.bpf_link__destroy(link);
    }
  }

  /**
   * The ancestors beyond the parent, nearest first: the grandparent the kernel recorded at
   * the access, then each entry's parent, every one verified by its start time (a pid reused
   * since is "unknown", never another process's identity), ending at the container's first
   * process or the host's init, a process the kernel does not know, or MAX_ANCESTORS.
   */
  ancestors(process: ProcessIdentity): Ancestor[] {
    const out: Ancestor[] = [];
    const key = Buffer.alloc(4);
    const value = Buffer.alloc(PROC_LAYOUT.size);
    let next = process.grandparent;
    while (next && next.pid > 0 && out.length < MAX_ANCESTORS) {
      key.writeUInt32LE(next.pid);
      const found = (this.lib.bpf_map_lookup_elem(this.procsFd, key, value) as number) === 0;
      const proc = found ? decodeProc(value) : undefined;
      if (!proc || proc.startNs !== next.startNs) {
        out.push({ pid: next.pid, exe: { source: "unknown" } });
        break;
      }
      out.push({ pid: next.pid, exe: proc.exe });
      if (proc.nsPid === 1) break; // a container's first process, or the host's init
      next = { pid: proc.ppid, startNs: proc.parentStartNs };
    }
    return out;
  }

  close(keepPinned: boolean): void {
    for (const link of this.links) releaseLink(this.lib, link, keepPinned);
    this.links.length = 0;
  }
}
