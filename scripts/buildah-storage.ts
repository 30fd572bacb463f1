/** The buildah storage an image build records (scripts/build-image.ts): where its image lives. */
export interface BuildahStorage {
  root: string;
  runroot: string;
  driver: string;
}

/** The global flags that point buildah at that storage. */
export function buildahStorageFlags(storage: BuildahStorage): string[] {
  return ["--root", storage.root, "--runroot", storage.runroot, "--storage-driver", storage.driver];
}
