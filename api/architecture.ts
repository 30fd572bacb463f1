/**
 * The architectures Hive's kernel program is compiled for (bpf/build.sh, one object each from
 * the same source; they differ only in the registers a kprobe reads its arguments from), by
 * Node's `process.arch`: the object file under bpf/ and the node label `kubernetes.io/arch` the
 * DaemonSet selects.
 */
export const ARCHITECTURES = {
  x64: { object: "hive.bpf.o", kubernetes: "amd64" },
  arm64: { object: "hive.arm64.bpf.o", kubernetes: "arm64" },
} as const;

export type Architecture = keyof typeof ARCHITECTURES;

export function isSupportedArchitecture(arch: string): arch is Architecture {
  return Object.hasOwn(ARCHITECTURES, arch);
}
