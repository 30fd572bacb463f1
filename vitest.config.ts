import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * The suites that boot stock kernels under QEMU run for minutes, each keeping one CPU busy
 * with emulation. They start first, longest first, on workers of their own (one file per kernel,
 * so that no worker waits while another runs three guests in a row), and everything else runs
 * beside them instead of after them.
 */
const EMULATED = [
  // The README on a one-node cluster: a kubelet and containerd in a 6.12 guest, the longest of all.
  /test\/e2e\/readme\.test\.ts$/,
  /test\/kernel\/kernel-6\.1\.test\.ts$/,
  /test\/image\/agent-on-kernels\.test\.ts$/,
  /test\/kernel\/kernel-6\.12\.test\.ts$/,
  /test\/kernel\/kernel-5\.10\.test\.ts$/,
];
const rank = (file: TestSpecification) => {
  const i = EMULATED.findIndex((re) => re.test(file.moduleId));
  return i === -1 ? EMULATED.length : i;
};

class EmulatedFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    return sorted
      .map((file, i) => ({ file, i }))
      .sort((a, b) => rank(a.file) - rank(b.file) || a.i - b.i)
      .map(({ file }) => file);
  }
}

export default defineConfig({
  test: {
    include: ["**/*.test.ts"],
    // test/arm64 runs by `npm run test:arm64` only (vitest.arm64.config.ts).
    // The agent image in containerd on the three kernels (test/image/agent-on-kernels.test.ts) runs by
    // `npm run test:image`: the README end-to-end covers the image on a real node (6.12) in the
    // default run, and both together would hold the two cores for most of it.
    exclude: [
      "node_modules/**",
      "dist/**",
      ".tmp/**",
      "test/arm64/**",
      ...(process.env.HIVE_IMAGE_GUESTS ? [] : ["test/image/agent-on-kernels.test.ts"]),
    ],
    // A hang guard: tests against a real API server share two cores with the emulated guests.
    testTimeout: 60_000,
    hookTimeout: 600_000,
    // Vitest's default (CPUs − 1) is one worker on a two-CPU machine: the emulated suites would
    // run one after the other and everything else after them.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    sequence: { sequencer: EmulatedFirst },
    reporters: ["default", ["json", { outputFile: ".tmp/vitest-results.json" }]],
  },
});
