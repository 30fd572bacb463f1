/** Kubernetes plumbing of the agent: client configuration, informers, leader election. */
export * from "./api-errors.ts";
export * from "./informer.ts";
export * from "./kube-client.ts";
export * from "./lease.ts";
