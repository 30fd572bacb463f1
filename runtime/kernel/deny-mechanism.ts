/**
 * How this kernel denies an access (a trap's `action: deny`): through the BPF LSM's
 * inode_permission hook where `bpf` is among the kernel's active LSMs (its securityfs `lsm` file
 * lists them), else by fmod_ret on security_inode_permission (BPF trampolines, 5.7+), else not at
 * all: denying traps then alert, and the watcher says why (denyState). An LSM program on a kernel
 * whose BPF LSM is not active would attach and never run, so it is chosen only when listed.
 */
import { readFileSync } from "node:fs";

export type DenyMechanism = "bpf-lsm" | "fmod_ret";

/** Each mechanism's program in bpf/hive.bpf.c. */
export const DENY_PROGRAMS: Record<DenyMechanism, string> = {
  "bpf-lsm": "hive_deny_lsm",
  fmod_ret: "hive_deny",
};

/** Where the kernel lists its active LSMs (securityfs). */
export const DEFAULT_LSM_FILE = "/sys/kernel/security/lsm";

export function describeMechanism(mechanism: DenyMechanism): string {
  return mechanism === "bpf-lsm"
    ? "the BPF LSM's inode_permission hook"
    : "fmod_ret on security_inode_permission";
}

/** The mechanisms to try, best first, and why the BPF LSM is not among them when it is not. */
export function denyMechanisms(lsmFile = DEFAULT_LSM_FILE): { order: DenyMechanism[]; note?: string } {
  let active: string[];
  try {
    active = readFileSync(lsmFile, "utf8").trim().split(",");
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return { order: ["fmod_ret"], note: `the active LSMs cannot be read (${why}): the BPF LSM is not used` };
  }
  if (active.includes("bpf")) return { order: ["bpf-lsm", "fmod_ret"] };
  return { order: ["fmod_ret"], note: `bpf is not an active LSM here (${active.join(",")})` };
}
