/** The agent image itself: `buildah bud` of the unchanged Dockerfile, with nothing pulled. */
import { networkFlags } from "./network.ts";
import { buildah, imageId, run, seconds, step, storageFlags, workingContainers } from "./run.ts";
import { IMAGE, root } from "./settings.ts";

export interface BuiltImage {
  imageId: string;
  buildSeconds: number;
}

/** Builds IMAGE from the Dockerfile and drops the image it replaces. */
export async function buildImage(): Promise<BuiltImage> {
  const previous = await imageId(IMAGE);
  const buildStarted = performance.now();
  const network = await step("reading the host's npm registry and CA bundle", networkFlags, true);
  const containersBefore = await workingContainers();
  await step("buildah bud (the Dockerfile)", () => bud(network, containersBefore));
  const buildSeconds = seconds(buildStarted);
  const id = (await imageId(IMAGE)) as string;
  // Keep the storage small: vfs stores every layer as a full copy.
  if (previous && previous !== id) await buildah(["rmi", previous]).catch(() => undefined);
  await buildah(["rmi", "--prune"]).catch(() => undefined);
  return { imageId: id, buildSeconds };
}

function bud(network: string[], containersBefore: Set<string>): Promise<string> {
  return run(
    "buildah",
    [
      ...storageFlags,
      "bud",
      "--isolation",
      "chroot",
      "--pull=never",
      // No --layers: with vfs every cached step is a full copy of its rootfs (measured: a
      // cold build 6 min instead of 2, an unchanged rebuild 4.7 min, 8 GiB of storage);
      // the inputs hash skips unchanged builds instead.
      "--format",
      "oci",
      ...network,
      "--tag",
      IMAGE,
      "--file",
      "Dockerfile",
      ".",
    ],
    { cwd: root },
  ).catch(async (error: Error) => {
    // A failed stage leaves its working container (a full rootfs copy with vfs) behind.
    for (const id of await workingContainers())
      if (!containersBefore.has(id)) await buildah(["rm", id]).catch(() => undefined);
    throw error;
  });
}
