/**
 * How the trap program reaches inode_permission on the running kernel, chosen at load time
 * with the least privilege that works, and why a refused attach was refused.
 *
 * Three ways, in the order `auto` tries them:
 *   kprobe.multi  the kprobe program through a kprobe.multi BPF link (Linux 5.18+ built with
 *                 CONFIG_FPROBE). Needs CAP_BPF + CAP_PERFMON only.
 *   fentry        a BPF trampoline (5.5+ with direct ftrace calls). CAP_BPF + CAP_PERFMON only.
 *   kprobe        the kprobe program through perf_event_open. Debian's and Ubuntu's kernels
 *                 carry a patch (kernel.perf_event_paranoid = 3, resp. 4) under which
 *                 perf_event_open needs CAP_SYS_ADMIN whatever CAP_PERFMON says: the last
 *                 resort, for kernels that have neither link.
 */
import { readFileSync } from "node:fs";
import { HiveError } from "../../api/errors.ts";
import { ATTACH_MODES, type AttachMode, type AttachRequest } from "./contract.ts";
import { errnoName } from "./libbpf-ffi.ts";

/** The program of each mode: the trap itself and the parent-directory hook of split kernels. */
export const ATTACH_PROGRAMS: Record<AttachMode, { trap: string; parent: string }> = {
  "kprobe.multi": {
    trap: "handle_inode_permission_multi",
    parent: "handle_security_inode_permission_multi",
  },
  fentry: { trap: "handle_inode_permission_fentry", parent: "handle_security_inode_permission_fentry" },
  kprobe: { trap: "handle_inode_permission", parent: "handle_security_inode_permission" },
};

/**
 * The hooks beside the trap, attached on every kernel in the trap's mode. The change hooks
 * (bpf/change.bpf.h hive_change): a trapped file unlinked, renamed away, replaced by a rename, or
 * truncated is reported on the file's own slot. The memory hook (bpf/process.bpf.h
 * hive_memory_access): a process whose memory another one may write without ptrace
 * (process_vm_writev, /proc/PID/mem) is marked traced for the allow lists. Each runs only for
 * those (rare) operations; `without` says what is lost when one cannot attach.
 */
export const CHANGE_HOOKS = [
  {
    name: "unlink",
    symbol: "security_inode_unlink",
    programs: {
      "kprobe.multi": "handle_inode_unlink_multi",
      fentry: "handle_inode_unlink_fentry",
      kprobe: "handle_inode_unlink",
    },
    without: "a trapped file's deletion raises no alert",
  },
  {
    name: "rename",
    symbol: "security_inode_rename",
    programs: {
      "kprobe.multi": "handle_inode_rename_multi",
      fentry: "handle_inode_rename_fentry",
      kprobe: "handle_inode_rename",
    },
    without: "a trapped file renamed away or replaced by a rename raises no alert",
  },
  {
    name: "truncate",
    symbol: "do_truncate",
    programs: {
      "kprobe.multi": "handle_truncate_multi",
      fentry: "handle_truncate_fentry",
      kprobe: "handle_truncate",
    },
    without: "a trapped file's truncation raises no alert",
  },
  {
    name: "memory",
    symbol: "security_ptrace_access_check",
    programs: {
      "kprobe.multi": "handle_memory_access_multi",
      fentry: "handle_memory_access_fentry",
      kprobe: "handle_memory_access",
    },
    without:
      "a process whose memory another wrote through process_vm_writev or /proc/PID/mem is not seen as traced",
  },
] as const satisfies ReadonlyArray<{
  name: string;
  symbol: string;
  programs: Record<AttachMode, string>;
  without: string;
}>;
export type ChangeHook = (typeof CHANGE_HOOKS)[number];

/** A change hook's link (link_change_unlink_fentry, …). */
export const changeLinkPinName = (hook: ChangeHook, mode: AttachMode) =>
  `link_change_${hook.name}_${mode.replace(".", "_")}`;

/** File name of a mode's pinned link under the pin root (link_kprobe, link_fentry, link_kprobe_multi). */
export const linkPinName = (mode: AttachMode) => `link_${mode.replace(".", "_")}`;
/** The parent-directory hook's link (kernels whose inode_permission is split). */
export const parentLinkPinName = (mode: AttachMode) => `link_parent_${mode.replace(".", "_")}`;
/** The pin of the trap program the link runs: what a later agent reads the running version from. */
export const PROGRAM_PIN = "prog_trap";

/** The mode of the link pinned among `names` (a pin directory's entries), or null. */
export function pinnedLinkMode(names: readonly string[]): AttachMode | null {
  return ATTACH_MODES.find((mode) => names.includes(linkPinName(mode))) ?? null;
}

/** Linux capability numbers (include/uapi/linux/capability.h) of the ones Hive reasons about. */
const CAPABILITY_BITS = { SYS_ADMIN: 21, PERFMON: 38, BPF: 39 } as const;
type Capability = keyof typeof CAPABILITY_BITS;

/** What decides the attach mode, read once per load from /proc (names only: no CAP_SYSLOG needed). */
export interface KernelFacts {
  /** kprobe.multi links exist (fprobe is built in); null when /proc/kallsyms is unreadable. */
  kprobeMulti: boolean | null;
  /** GCC split inode_permission (a local .part clone the kernel calls directly: Debian 5.10). */
  splitInodePermission: boolean;
  /** kernel.perf_event_paranoid, or null when unreadable. */
  perfEventParanoid: number | null;
  /** This process's effective capabilities among those above, or null when unreadable. */
  capabilities: ReadonlySet<Capability> | null;
}

export function readKernelFacts(procRoot = "/proc"): KernelFacts {
  let symbols: string | null = null;
  try {
    symbols = readFileSync(`${procRoot}/kallsyms`, "utf8");
  } catch {
    symbols = null;
  }
  let paranoid: number | null = null;
  try {
    paranoid = Number.parseInt(readFileSync(`${procRoot}/sys/kernel/perf_event_paranoid`, "utf8"), 10);
  } catch {
    paranoid = null;
  }
  return {
    // register_fprobe is compiled only with CONFIG_FPROBE, which kprobe.multi links need (5.18+).
    kprobeMulti: symbols === null ? null : /\sregister_fprobe$/m.test(symbols),
    splitInodePermission: symbols !== null && /\sinode_permission\.part\.\d+$/m.test(symbols),
    perfEventParanoid: Number.isNaN(paranoid) ? null : paranoid,
    capabilities: effectiveCapabilities(procRoot),
  };
}

function effectiveCapabilities(procRoot: string): ReadonlySet<Capability> | null {
  try {
    const hex = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync(`${procRoot}/self/status`, "utf8"))?.[1];
    if (!hex) return null;
    const mask = BigInt(`0x${hex}`);
    const held = new Set<Capability>();
    for (const [name, bit] of Object.entries(CAPABILITY_BITS) as [Capability, number][]) {
      if ((mask >> BigInt(bit)) & 1n) held.add(name);
    }
    return held;
  } catch {
    return null;
  }
}

/** The modes to try, in order, each with why it comes at that point. */
export function attachCandidates(
  request: AttachRequest,
  facts: KernelFacts,
  pinned: AttachMode | null,
): Array<{ mode: AttachMode; reason: string }> {
  if (request !== "auto") return [{ mode: request, reason: `requested (--attach ${request})` }];
  const out: Array<{ mode: AttachMode; reason: string }> = [];
  if (pinned) out.push({ mode: pinned, reason: "an earlier agent left this link pinned; adopting it" });
  if (facts.kprobeMulti !== false) {
    out.push({
      mode: "kprobe.multi",
      reason: "kprobe.multi link: the kernel has fprobe (5.18+), which needs only CAP_BPF + CAP_PERFMON",
    });
  }
  out.push({
    mode: "fentry",
    reason: `BPF trampoline: ${
      facts.kprobeMulti === false
        ? "this kernel has no kprobe.multi links (before 5.18, or CONFIG_FPROBE off)"
        : "the kprobe.multi link could not be used"
    }; fentry needs only CAP_BPF + CAP_PERFMON`,
  });
  out.push({
    mode: "kprobe",
    reason: "perf-event kprobe: neither a kprobe.multi link nor a BPF trampoline could attach",
  });
  return out.filter((c, i) => out.findIndex((o) => o.mode === c.mode) === i);
}

/** The kernel functions each program of ATTACH_PROGRAMS attaches to. */
export const ATTACH_SYMBOLS = { trap: "inode_permission", parent: "security_inode_permission" } as const;

const ENOENT = 2;
const EPERM = 1;
const EACCES = 13;

/** Why attaching `mode` failed with `errno`, as the error a user can act on. */
export function attachError(mode: AttachMode, errno: number, facts: KernelFacts): HiveError {
  const symbol = ATTACH_SYMBOLS.trap;
  if (errno === EPERM || errno === EACCES) return privilegeError(mode, "attach", errno, facts);
  const name = errnoName(errno);
  if (mode === "fentry") {
    return new HiveError("FentryUnsupported", `attaching fentry on ${symbol} failed: ${name}`, {
      object: symbol,
      hint: "this kernel lacks BPF trampolines (before 5.5, or no direct ftrace calls); use --attach auto",
      errno,
    });
  }
  const how = mode === "kprobe.multi" ? "through a kprobe.multi link" : "through perf_event_open";
  return new HiveError("KprobeUnsupported", `attaching the kprobe on ${symbol} ${how} failed: ${name}`, {
    object: symbol,
    hint:
      mode === "kprobe.multi"
        ? "kprobe.multi links need Linux 5.18+ with CONFIG_FPROBE; use --attach auto"
        : errno === ENOENT
          ? `${symbol} is not traceable on this kernel (CONFIG_KPROBES off?); use --attach auto`
          : "this kernel may lack kprobe support (CONFIG_KPROBES); use --attach auto",
    errno,
  });
}

/**
 * A refused bpf() or perf_event_open(), named for what is missing: the capability, or the
 * perf_event_paranoid patch, and the option that grants it.
 */
export function privilegeError(
  mode: AttachMode,
  step: "load" | "attach",
  errno: number,
  facts: KernelFacts,
): HiveError {
  const caps = facts.capabilities;
  const lacks = (c: Capability) => caps !== null && !caps.has(c);
  const what = `${step === "load" ? "loading" : "attaching"} the ${mode} program was refused (${errnoName(errno)})`;
  const details = { object: ATTACH_SYMBOLS.trap, errno, mode, perfEventParanoid: facts.perfEventParanoid };
  const missing = (["BPF", "PERFMON"] as const).filter(lacks);
  if (missing.length > 0) {
    return new HiveError(
      "PermissionDenied",
      `${what}: this process lacks ${missing.map((c) => `CAP_${c}`).join(" and ")}`,
      {
        ...details,
        hint: `add ${missing.join(", ")} to the container's capabilities (the HiveMonitor DaemonSet does); kernels before 5.8 know neither and need SYS_ADMIN: set legacyKernelCapabilities: true`,
      },
    );
  }
  if (mode === "kprobe" && step === "attach" && lacks("SYS_ADMIN")) {
    const paranoid = facts.perfEventParanoid;
    return new HiveError(
      "PermissionDenied",
      `${what}: perf_event_open needs CAP_SYS_ADMIN here${
        paranoid !== null && paranoid > 2
          ? ` (kernel.perf_event_paranoid = ${paranoid}: Debian's and Ubuntu's kernels reserve perf events to CAP_SYS_ADMIN above 2)`
          : ""
      }`,
      {
        ...details,
        hint: "use --attach auto where the kernel has kprobe.multi links or BPF trampolines (they need only BPF + PERFMON); where only a perf-event kprobe can attach, set the HiveMonitor option legacyKernelCapabilities: true (adds SYS_ADMIN), or set kernel.perf_event_paranoid to 2 on the node",
      },
    );
  }
  return new HiveError("PermissionDenied", what, {
    ...details,
    hint: "run as root, or with CAP_BPF + CAP_PERFMON (+ CAP_SYS_RESOURCE before 5.11); kernels before 5.8 need SYS_ADMIN (legacyKernelCapabilities: true)",
  });
}
