/** Hive's contracts: one definition each, everything else derives from them. */
export * from "./alert.ts";
export * from "./container-name.ts";
export * from "./crd.ts";
export * from "./data.ts";
export * from "./ids.ts";
export * from "./meta.ts";
export * from "./policy.ts";
export * from "./tenancy.ts";
export * from "./validate.ts";
