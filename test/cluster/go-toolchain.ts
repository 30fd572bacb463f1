/**
 * The `go` client the tests use: to build the pinned binaries (build-binaries.ts) and to read a
 * published definition (a CRD) from a module the Go module proxy serves, into the module cache.
 */
import { spawnSync } from "node:child_process";

export function goBinary(): string {
  for (const candidate of ["go", "/usr/local/go/bin/go", "/usr/lib/go/bin/go"]) {
    const r = spawnSync(candidate, ["version"], { encoding: "utf8" });
    if (r.status === 0) return candidate;
  }
  throw new Error("no Go toolchain on PATH (nor /usr/local/go/bin/go): install Go 1.26 or newer");
}

/** Downloads `module@version` into the module cache (once) and returns its directory there. */
export function moduleDir(module: string, version: string): string {
  const r = spawnSync(goBinary(), ["mod", "download", "-json", `${module}@${version}`], {
    encoding: "utf8",
    env: { ...process.env, GOTOOLCHAIN: "local", GOFLAGS: "-mod=mod" },
    maxBuffer: 16 << 20,
  });
  const info = (() => {
    try {
      return JSON.parse(r.stdout) as { Dir?: string; Error?: string };
    } catch {
      return {};
    }
  })();
  if (r.status !== 0 || !info.Dir)
    throw new Error(`go mod download ${module}@${version} failed: ${info.Error ?? r.stderr}`);
  return info.Dir;
}
