/**
 * Where the compiled program is, apart from the loader so that what only names or hashes the
 * object (`hive version`, hive_build_info) never loads libbpf.
 */
import { fileURLToPath } from "node:url";
import { ARCHITECTURES, type Architecture, isSupportedArchitecture } from "../../api/architecture.ts";

/** The object for `arch` under bpf/ at the package root: two levels up from sources, three from dist/. */
export function objectPathFor(arch: Architecture): string {
  const up = /\/dist\/runtime\/kernel\/[^/]+$/.test(import.meta.url) ? "../../../" : "../../";
  return fileURLToPath(new URL(`${up}bpf/${ARCHITECTURES[arch].object}`, import.meta.url));
}

/**
 * This machine's object (bpf/hive.bpf.o on x86-64, bpf/hive.arm64.bpf.o on arm64). Elsewhere the
 * x86-64 one, which only names it: loading refuses the architecture first (architecture.ts).
 */
export const DEFAULT_OBJECT_PATH = objectPathFor(
  isSupportedArchitecture(process.arch) ? process.arch : "x64",
);
