/** The BPF filesystem where maps and links are pinned so that a restarted agent adopts them. */
import { existsSync, mkdirSync, statfsSync } from "node:fs";
import { dirname } from "node:path";
import { HiveError } from "../../api/errors.ts";

/** Where the agent pins its maps and link. */
export const DEFAULT_PIN_ROOT = "/sys/fs/bpf/hive";

/** statfs f_type of the BPF filesystem (include/uapi/linux/magic.h BPF_FS_MAGIC). */
const BPF_FS_MAGIC = 0xcafe4a11;

/** Whether `path` (which must exist) lies on a mounted BPF filesystem, where pins can live. */
export function isOnBpffs(path: string): boolean {
  return statfsSync(path).type === BPF_FS_MAGIC;
}

/** Creates the pin directory, refusing anywhere but a bpffs (pins elsewhere cannot exist). */
export function ensureBpffsDir(dir: string): void {
  let existing = dir;
  while (!existsSync(existing)) existing = dirname(existing);
  if (!isOnBpffs(existing)) {
    throw new HiveError("BpffsMissing", "the pin directory is not on a BPF filesystem", {
      object: dir,
      hint: "mount it (mount -t bpf bpf /sys/fs/bpf; in a pod, mount the host's /sys/fs/bpf) or pass pinRoot: null",
    });
  }
  // One level at a time: Node's recursive mkdir can spin on special filesystems.
  const missing: string[] = [];
  for (let d = dir; d !== existing; d = dirname(d)) missing.unshift(d);
  for (const d of missing) mkdirSync(d);
}
