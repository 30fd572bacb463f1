/** Where Hive's kernel program can run at all (no libbpf needed to tell). */
import { HiveError } from "../errors.ts";

/**
 * The architectures the program is compiled for (bpf/build.sh, one object each from the same
 * source; they differ only in the registers a kprobe reads its arguments from), by Node's
 * `process.arch`: the object file under bpf/ and the node label `kubernetes.io/arch`.
 */
export const ARCHITECTURES = {
  x64: { object: "hive.bpf.o", kubernetes: "amd64" },
  arm64: { object: "hive.arm64.bpf.o", kubernetes: "arm64" },
} as const;

export type Architecture = keyof typeof ARCHITECTURES;

export function isSupportedArchitecture(arch: string): arch is Architecture {
  return Object.hasOwn(ARCHITECTURES, arch);
}

/** Anywhere else the kprobe would read the wrong registers: refuse to start instead. */
export function checkArchitecture(arch: string = process.arch): Architecture {
  if (isSupportedArchitecture(arch)) return arch;
  const names = Object.values(ARCHITECTURES).map((a) => a.kubernetes);
  throw new HiveError(
    "ArchitectureUnsupported",
    `Hive's kernel program is built for ${names.join(" and ")}, not ${arch}`,
    {
      object: arch,
      hint: `run the agent on ${names.join(" or ")} nodes (the DaemonSet selects them)`,
    },
  );
}
