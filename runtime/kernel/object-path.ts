/**
 * Where the compiled program is, apart from the loader so that what only names or hashes the
 * object (`hive version`, hive_build_info) never loads libbpf.
 */
import { fileURLToPath } from "node:url";

/** bpf/hive.bpf.o at the package root: two levels up from sources, three from dist/. */
export const DEFAULT_OBJECT_PATH = fileURLToPath(
  new URL(
    /\/dist\/runtime\/kernel\/[^/]+$/.test(import.meta.url)
      ? "../../../bpf/hive.bpf.o"
      : "../../bpf/hive.bpf.o",
    import.meta.url,
  ),
);
