/** Container access for the discover controller: find a container's process, resolve a trap path in its root. */
export * from "./container-runtime.ts";
export * from "./file-resolver.ts";
export * from "./safe-path.ts";
