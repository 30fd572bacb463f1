import { defineConfig } from "vitest/config";

/** `npm run test:arm64`: the arm64 image in an arm64 guest (test/arm64), apart from `npm test`. */
export default defineConfig({
  test: {
    include: ["test/arm64/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 1_800_000,
    reporters: ["default", ["json", { outputFile: ".tmp/arm64/vitest-results.json" }]],
  },
});
