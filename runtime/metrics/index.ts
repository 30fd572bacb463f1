/** The agent's Prometheus metrics and its /metrics, /healthz, /readyz server. */
export * from "./health.ts";
export * from "./metrics.ts";
export * from "./server.ts";
