/**
 * Alerts: build (kernel event + watched file → Alert), print, deliver (spooled, retried,
 * signed), rate-limit and record as Kubernetes Events. Entry point: createAlertPipeline.
 */
export * from "./alert-source.ts";
export * from "./auth-failure-event.ts";
export * from "./boot-clock.ts";
export * from "./build-alert.ts";
export * from "./callback-secret-watch.ts";
export * from "./delivery/cloudevents.ts";
export * from "./delivery/destinations.ts";
export * from "./delivery/dispatcher.ts";
export * from "./delivery/secret-headers.ts";
export * from "./delivery/signature.ts";
export * from "./pipeline.ts";
export * from "./pod-events.ts";
export * from "./proc-stat.ts";
export * from "./rate-limit.ts";
export * from "./spool/spool.ts";
