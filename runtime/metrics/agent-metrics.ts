/** The agent process's own metrics: which build runs, and whether it is ready. */
import { Gauge, type Registry } from "prom-client";
import type { BuildInfo } from "../build-info.ts";
import type { ScrapeSources } from "./scrape-sources.ts";

export function defineAgentMetrics(
  registers: Registry[],
  build: Pick<BuildInfo, "version" | "program" | "nodeVersion">,
  sources: ScrapeSources,
): void {
  new Gauge({
    name: "hive_build_info",
    help: "Always 1: the package version, the compiled kernel program (SHA-256 of its object) and the Node.js version, as labels.",
    labelNames: ["version", "program", "node_version"],
    registers,
  }).set({ version: build.version, program: build.program, node_version: build.nodeVersion }, 1);
  new Gauge({
    name: "hive_agent_ready",
    help: "1 when every readiness check of the agent passes (what /readyz answers), else 0; /readyz?verbose names the failing ones.",
    registers,
    async collect() {
      if (sources.readiness) this.set((await sources.readiness()) ? 1 : 0);
    },
  });
}
