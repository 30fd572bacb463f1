/** The kernel path: what the agent imports. */
export type {
  AttachMode,
  FileKey,
  KernelCounters,
  KernelEvent,
  KernelWatcher,
  WatchEntry,
} from "./contract.ts";
export { type InodePermissionSignature, inodePermissionSignature } from "./kernel-btf.ts";
export { accessesFromMask, fileKeyFromStat, fileKeyId, kernelDev, maskFromAccesses } from "./layout.ts";
export {
  DEFAULT_OBJECT_PATH,
  DEFAULT_PIN_ROOT,
  isOnBpffs,
  type KernelWatcherOptions,
  type LibbpfCounters,
  LibbpfKernelWatcher,
} from "./loader.ts";
export { openKernelWatcher } from "./open-watcher.ts";
export { type PinnedState, readPinnedState } from "./pinned-state.ts";
