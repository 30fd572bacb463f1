import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["**/*.test.ts"],
    exclude: ["node_modules/**", "dist/**", ".tmp/**"],
    testTimeout: 30_000,
    hookTimeout: 600_000,
    reporters: ["default", ["json", { outputFile: ".tmp/vitest-results.json" }]],
  },
});
