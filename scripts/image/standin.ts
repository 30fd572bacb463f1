/**
 * The local stand-ins for the Dockerfile's public base images, kept in the buildah storage
 * and rebuilt only when what they are made from (their key) changes.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildah, imageId, StepError, say, step } from "./run.ts";
import { cacheDir, force } from "./settings.ts";

// Bump to rebuild the base stand-ins when their recipe changes in a way their key misses.
export const STANDIN_RECIPE = 1;

interface StandinState {
  [name: string]: { key: string; id: string };
}
const statePath = join(cacheDir, "standins.json");
function readState(): StandinState {
  return existsSync(statePath) ? (JSON.parse(readFileSync(statePath, "utf8")) as StandinState) : {};
}

/** Keeps one stand-in image: reuses it when present and made from the same key. */
export async function standin(name: string, key: string, make: () => Promise<void>): Promise<string> {
  const state = readState();
  const present = await imageId(name);
  if (!force && present && state[name]?.key === key && state[name]?.id === present) {
    say(`${name}: up to date (local stand-in ${present.slice(0, 12)})`);
    return present;
  }
  await step(`stand-in ${name}`, make);
  const id = await imageId(name);
  if (!id) throw new StepError(`step "stand-in ${name}" made no image`);
  // The stand-in it replaces is untagged now; drop it unless an image still builds on it.
  if (present && present !== id) await buildah(["rmi", present]).catch(() => undefined);
  writeFileSync(statePath, JSON.stringify({ ...readState(), [name]: { key, id } }, null, 2));
  return id;
}

/** Commits `tree` (a directory laid out as the image's root) on top of `from` as image `name`. */
export async function commitTree(from: string, tree: string, config: string[], name: string): Promise<void> {
  // `scratch` is no image but an empty start: nothing to pull either way.
  const ctr = (await buildah(["from", ...(from === "scratch" ? [] : ["--pull=never"]), from])).trim();
  try {
    await buildah(["add", ctr, `${tree}/`, "/"]);
    await buildah(["config", ...config, ctr]);
    await buildah(["commit", "--rm", ctr, name]);
  } catch (e) {
    await buildah(["rm", ctr]).catch(() => undefined);
    throw e;
  }
}
