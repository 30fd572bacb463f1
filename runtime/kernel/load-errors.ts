/**
 * libbpf's own messages (the verifier log among them), captured so that a failed load
 * becomes an error that says why: a verifier rejection with the log's tail, a memlock
 * limit, missing capabilities, maps of another version left pinned.
 */
import koffi from "koffi";
import { HiveError } from "../../api/errors.ts";
import { type KernelFacts, privilegeError } from "./attach.ts";
import type { AttachMode } from "./contract.ts";
import { errnoName, libbpf, libcFns } from "./libbpf-ffi.ts";

const libbpfLog: string[] = [];
let printRegistered = false;

/** Routes libbpf's messages into a bounded buffer (once per thread). */
export function captureLibbpfLog(): void {
  if (printRegistered) return;
  const lib = libbpf();
  const { vsnprintf } = libcFns();
  const buf = Buffer.alloc(8192);
  const print = koffi.register((_level: number, fmt: string, args: bigint) => {
    const n = vsnprintf(buf, buf.length, fmt, args) as number;
    for (const line of buf.toString("utf8", 0, Math.max(0, Math.min(n, buf.length - 1))).split("\n")) {
      if (line) libbpfLog.push(line);
    }
    if (libbpfLog.length > 400) libbpfLog.splice(0, libbpfLog.length - 400);
    return 0;
  }, koffi.pointer(lib.printFn));
  lib.libbpf_set_print(print);
  printRegistered = true;
}

/** Forgets earlier messages: the next error quotes only what its own call logged. */
export function clearLibbpfLog(): void {
  libbpfLog.length = 0;
}

/** bpf_object__load's negative errno as the error a user can act on. */
export function loadError(errno: number, object: string, mode: AttachMode, facts: KernelFacts): HiveError {
  const tail = libbpfLog.slice(-25);
  const log = tail.join("\n");
  if (/reuse pinned map|pinned map .* incompatible/i.test(log)) {
    return new HiveError(
      "PinsOfAnotherLayout",
      "the maps pinned by an earlier agent do not fit this program",
      {
        object,
        hint: "an agent of another version left them; remove the pin directory (e.g. rm -r /sys/fs/bpf/hive) and restart",
        libbpfLog: tail,
      },
    );
  }
  if (mode === "fentry" && (errno === 1 || errno === 95 || errno === 524) && !/capab/i.test(log)) {
    return new HiveError(
      "FentryUnsupported",
      `this kernel refused the fentry program (${errnoName(errno)})`,
      {
        object,
        hint: "fentry needs BPF trampolines and a traceable inode_permission; use --attach auto",
        libbpfLog: tail,
      },
    );
  }
  if (errno === 1 && /memlock|RLIMIT|ulimit -l/i.test(log)) {
    return new HiveError("MemlockLimit", "loading the BPF program hit RLIMIT_MEMLOCK", {
      object,
      hint: "raise the locked-memory limit (ulimit -l unlimited, or LimitMEMLOCK=infinity) on kernels before 5.11",
      libbpfLog: tail,
    });
  }
  if (errno === 1) return privilegeError(mode, "load", errno, facts);
  if (mode === "kprobe.multi" && errno === 22 && !/processed \d+ insns/.test(log)) {
    return new HiveError("KprobeUnsupported", "this kernel does not know kprobe.multi programs (EINVAL)", {
      object,
      hint: "kprobe.multi links need Linux 5.18+ with CONFIG_FPROBE; use --attach auto",
      libbpfLog: tail,
    });
  }
  if (/verifier|processed \d+ insns|R\d+ /.test(log) || errno === 13 || errno === 22) {
    return new HiveError(
      "VerifierRejected",
      `the kernel's verifier rejected the ${mode} program (${errnoName(errno)})`,
      { object, hint: `verifier log tail:\n${log}`, libbpfLog: tail },
    );
  }
  return new HiveError("BpfCallFailed", `loading the BPF object failed: ${errnoName(errno)}`, {
    object,
    hint: log,
    libbpfLog: tail,
  });
}
