/**
 * What a container start costs discover on a node with many images: the trap paths looked up in
 * the image layers when a new image's layers appear (the snapshots directory changes).
 *
 *   npm run bench -- image-layers      (or: node bench/image-layers.ts)
 *
 * IMAGES images of LAYERS committed layers each, in containerd's overlayfs layout (`<id>/fs`),
 * over a few shared base layers (merged /usr: `/bin` → `usr/bin`), with each image's chain known
 * as a container's overlay names it; then STARTS container starts, each of an image new to the
 * node (LAYERS new layers), after which every trap path is found again, as discover does.
 *
 *   rescan       every layer walked again for every trap path at each start (a path's files
 *                cached only per set of layers: any new layer changes the set);
 *   incremental  each (layer, path) walked once (runtime/discover/image-layers.ts LayerSteps).
 *
 * Printed: names opened and milliseconds per start, and the ratio of the two in this run. The
 * rescan runs the first RESCAN_STARTS starts only (each walks every layer: seconds apiece).
 * HIVE_BENCH_IMAGES, HIVE_BENCH_LAYERS, HIVE_BENCH_STARTS, HIVE_BENCH_RESCAN_STARTS set the
 * sizes (300, 10, 100, 10).
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LayerSteps, layerDirs, resolveInLayers } from "../runtime/discover/image-layers.ts";

const IMAGES = Number(process.env.HIVE_BENCH_IMAGES ?? "300");
const LAYERS = Number(process.env.HIVE_BENCH_LAYERS ?? "10");
const STARTS = Number(process.env.HIVE_BENCH_STARTS ?? "100");
const RESCAN_STARTS = Math.min(STARTS, Number(process.env.HIVE_BENCH_RESCAN_STARTS ?? "10"));
const BASES = 5;
const TRAP_PATHS = ["/etc/shadow", "/etc/passwd", "/root/.ssh/authorized_keys", "/bin/su", "/etc/sudoers"];

interface Node {
  dir: string;
  next: number;
  /** Layer → the layers above it in some image's chain. */
  above: Map<string, Set<string>>;
}

function makeLayer(node: Node, fill: (fs: string) => void): string {
  const id = String(node.next++);
  const fs = join(node.dir, id, "fs");
  mkdirSync(fs, { recursive: true });
  fill(fs);
  return id;
}

const put = (fs: string, path: string) => {
  mkdirSync(join(fs, path, ".."), { recursive: true });
  writeFileSync(join(fs, path), "x");
};

function baseLayer(fs: string): void {
  put(fs, "etc/shadow");
  put(fs, "etc/passwd");
  put(fs, "usr/bin/su");
  put(fs, "usr/lib/libc.so.6");
  symlinkSync("usr/bin", join(fs, "bin"));
}

/** One image over a base: its own layers, a few touching the trapped paths as packages do. */
function addImage(node: Node, base: string, n: number): void {
  const chain = [base];
  for (let i = 1; i < LAYERS; i++)
    chain.unshift(
      makeLayer(node, (fs) => {
        put(fs, `app/${n}/layer-${i}`);
        if (i % 3 === 0) put(fs, "etc/passwd");
        if (i % 4 === 0) put(fs, "usr/bin/tool");
      }),
    );
  // What the image's container's overlay says: each layer's layers above it.
  chain.forEach((layer, i) => {
    const over = node.above.get(layer) ?? new Set<string>();
    for (const d of chain.slice(0, i)) over.add(d);
    node.above.set(layer, over);
  });
}

function findAll(steps: LayerSteps, node: Node): number {
  const layers = layerDirs(node.dir);
  steps.keepOnly(layers);
  const above = (layer: string) => [...(node.above.get(layer) ?? [])];
  let files = 0;
  for (const path of TRAP_PATHS) files += resolveInLayers(steps, layers, path, above).length;
  return files;
}

function scenario(
  remember: boolean,
  starts: number,
): { opensPerStart: number; msPerStart: number; files: number } {
  const node: Node = { dir: mkdtempSync(join(tmpdir(), "hive-bench-layers-")), next: 1, above: new Map() };
  try {
    const bases = Array.from({ length: BASES }, () => makeLayer(node, baseLayer));
    for (let n = 0; n < IMAGES; n++) addImage(node, bases[n % BASES] as string, n);
    // Without memory every start walks all; with it, the first look walks all once.
    const steps = new LayerSteps(node.dir, undefined, remember);
    findAll(steps, node);
    const opensBefore = steps.counts.opens;
    let ms = 0;
    let files = 0;
    for (let s = 0; s < starts; s++) {
      addImage(node, bases[s % BASES] as string, IMAGES + s);
      const started = performance.now();
      files = findAll(steps, node);
      ms += performance.now() - started;
    }
    return { opensPerStart: (steps.counts.opens - opensBefore) / starts, msPerStart: ms / starts, files };
  } finally {
    rmSync(node.dir, { recursive: true, force: true });
  }
}

export function run(): void {
  console.log(
    `${IMAGES} images × ${LAYERS} layers over ${BASES} bases, ${TRAP_PATHS.length} trap paths, ${STARTS} container starts of new images (rescan: the first ${RESCAN_STARTS})`,
  );
  const rescan = scenario(false, RESCAN_STARTS);
  const incremental = scenario(true, STARTS);
  // The same node after the same starts must arm the same copies either way.
  const check = scenario(true, RESCAN_STARTS);
  if (rescan.files !== check.files)
    throw new Error(`the two ways found different files: ${rescan.files} and ${check.files}`);
  const row = (name: string, r: typeof rescan) =>
    console.log(
      `  ${name.padEnd(12)} ${r.opensPerStart.toFixed(0).padStart(8)} names opened per start · ${r.msPerStart.toFixed(2).padStart(8)} ms per start`,
    );
  row("rescan", rescan);
  row("incremental", incremental);
  console.log(
    `  incremental / rescan: opens ${(incremental.opensPerStart / rescan.opensPerStart).toFixed(4)}, time ${(incremental.msPerStart / rescan.msPerStart).toFixed(4)} (${rescan.files} copies armed after ${RESCAN_STARTS} starts, the same both ways)`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) run();
