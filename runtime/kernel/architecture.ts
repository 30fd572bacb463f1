/** Where Hive's kernel program can run at all (no libbpf needed to tell). */
import { HiveError } from "../errors.ts";

/** The BPF program reads x86-64 registers: anywhere else it would load and watch nothing. */
export function checkArchitecture(arch: string = process.arch): void {
  if (arch === "x64") return;
  throw new HiveError("ArchitectureUnsupported", `Hive's kernel program supports x86-64 only, not ${arch}`, {
    object: arch,
    hint: "run the agent on amd64 nodes (the DaemonSet selects kubernetes.io/arch: amd64)",
  });
}
