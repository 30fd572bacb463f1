/** Where Hive's kernel program can run at all (no libbpf needed to tell). */
import { ARCHITECTURES, type Architecture, isSupportedArchitecture } from "../../api/architecture.ts";
import { HiveError } from "../../api/errors.ts";

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
