/**
 * The agent image cannot be built on these machines (no Docker engine), so its Dockerfile is
 * checked statically: every path it copies exists (in the build context, or as the product of
 * an earlier stage), nothing it copies is excluded by .dockerignore, and its entry point is
 * the agent's real entry point — the one the DaemonSet's arguments continue.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, posix, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { ARCHITECTURES } from "../../api/architecture.ts";
import { renderManifests } from "../../component/index.ts";
import { BUNDLE_DIR, BUNDLE_EXTERNAL } from "../../scripts/bundle-agent.ts";
import { MINIMAL } from "./configs.ts";

const root = join(import.meta.dirname, "../..");
/** Where the bundle is, from the package root (as the image lays it out). */
const BUNDLE_OUT = relative(root, BUNDLE_DIR);
const read = (path: string) => readFileSync(join(root, path), "utf8");

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  name: string;
  instructions: Instruction[];
}

/**
 * Dockerfile → stages of instructions (continuation lines joined, comments dropped), with the
 * `ARG NAME=default` lines before the first FROM (the base images) resolved in FROM lines, as
 * a build without `--build-arg` resolves them.
 */
function parseDockerfile(text: string): { args: Record<string, string>; stages: Stage[] } {
  const lines = text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  const args: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const line of lines) {
    const [, op = "", rest = ""] = /^(\S+)\s+(.*)$/.exec(line) ?? [];
    if (op.toUpperCase() === "ARG" && stages.length === 0) {
      const [name = "", value = ""] = rest.split("=", 2);
      args[name] = value;
      continue;
    }
    let operands = rest;
    if (op.toUpperCase() === "FROM") {
      operands = rest.replace(/\$\{(\w+)\}|\$(\w+)/g, (whole, braced?: string, bare?: string) => {
        const value = args[braced ?? bare ?? ""];
        if (value === undefined || value === "") throw new Error(`FROM uses ${whole}, which has no default`);
        return value;
      });
      stages.push({ name: /\bAS\s+(\S+)/i.exec(operands)?.[1] ?? String(stages.length), instructions: [] });
    }
    stages.at(-1)?.instructions.push({ op: op.toUpperCase(), args: operands });
  }
  return { args, stages };
}

interface Copy {
  from: string | undefined;
  sources: string[];
  dest: string;
}

function copies(stage: Stage): Copy[] {
  return stage.instructions
    .filter((i) => i.op === "COPY")
    .map((i) => {
      const words = i.args.split(/\s+/);
      const from = words.find((w) => w.startsWith("--from="))?.slice("--from=".length);
      const paths = words.filter((w) => !w.startsWith("--"));
      return { from, sources: paths.slice(0, -1), dest: paths.at(-1) as string };
    });
}

/** Absolute paths a stage provides: what it copied in, and what its RUN steps produce. */
function provided(stage: Stage): string[] {
  const out: string[] = [];
  let workdir = "/";
  const buildOutDir = JSON.parse(read("tsconfig.build.json")).compilerOptions.outDir as string;
  // bpf/build.sh writes one object per architecture (object-path.test.ts holds it to that list).
  const bpfOuts = Object.values(ARCHITECTURES).map((a) => a.object);
  for (const i of stage.instructions) {
    if (i.op === "WORKDIR") workdir = posix.resolve(workdir, i.args);
    if (i.op === "COPY") {
      const c = copies({ name: "", instructions: [i] })[0] as Copy;
      const dest = posix.resolve(workdir, c.dest);
      for (const s of c.sources) out.push(c.dest.endsWith("/") ? posix.join(dest, posix.basename(s)) : dest);
    }
    if (i.op === "RUN") {
      if (/\bnpm (ci|install)\b/.test(i.args)) out.push(posix.join(workdir, "node_modules"));
      if (/\bnpm run build\b/.test(i.args)) out.push(posix.join(workdir, buildOutDir));
      if (/\bnpm run bundle\b/.test(i.args)) out.push(posix.join(workdir, BUNDLE_OUT));
      for (const m of i.args.matchAll(/\bmkdir -p (\/\S+)/g)) out.push(m[1] as string);
      if (/\bbpf\/build\.sh\b/.test(i.args)) out.push(...bpfOuts.map((o) => posix.join(workdir, "bpf", o)));
    }
  }
  return out;
}

function dockerignored(path: string): boolean {
  const patterns = read(".dockerignore")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  const clean = path.replace(/\/$/, "").replace(/^\.\//, "");
  return patterns.some((p) => {
    const re = new RegExp(`^${p.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")}(/|$)`);
    return re.test(clean);
  });
}

const { args: baseArgs, stages } = parseDockerfile(read("Dockerfile"));
const final = stages.at(-1) as Stage;

describe("Dockerfile", () => {
  it("is multi-stage: the BPF object, the compiled package, then the runtime", () => {
    expect(stages.map((s) => s.name)).toEqual(["bpf", "build", "2"]);
    expect(stages[0]?.instructions.some((i) => i.op === "RUN" && /\bclang\b/.test(i.args))).toBe(true);
    expect(final.instructions[0]?.args).toMatch(/^node:24\b/);
    // The loader opens Debian's libbpf.so.1 through koffi.
    expect(final.instructions.some((i) => i.op === "RUN" && /\blibbpf1\b/.test(i.args))).toBe(true);
    expect(read("runtime/kernel/libbpf-ffi.ts")).toContain("libbpf.so.1");
  });

  it("names its base images by build arguments whose defaults are the public images", () => {
    // A registry-less build (scripts/build-image.ts) substitutes local images of those names.
    expect(baseArgs).toEqual({ DEBIAN_IMAGE: "debian:bookworm-slim", NODE_IMAGE: "node:24-bookworm-slim" });
    const froms = read("Dockerfile")
      .split("\n")
      .filter((l) => /^FROM\s/i.test(l));
    expect(froms).toEqual([
      `FROM $\{DEBIAN_IMAGE} AS bpf`,
      `FROM $\{NODE_IMAGE} AS build`,
      `FROM $\{NODE_IMAGE}`,
    ]);
    expect(stages.map((s) => s.instructions[0]?.args)).toEqual([
      "debian:bookworm-slim AS bpf",
      "node:24-bookworm-slim AS build",
      "node:24-bookworm-slim",
    ]);
  });

  it("ships of node_modules only what the bundle leaves outside: koffi, never @pulumi/*", () => {
    const pkg = JSON.parse(read("package.json"));
    for (const name of ["@pulumi/pulumi", "@pulumi/kubernetes"]) {
      expect(pkg.dependencies[name], `${name} is not a dependency`).toBeUndefined();
      expect(pkg.peerDependencies[name], `${name} is a peer dependency`).toBeDefined();
    }
    // The bundle's externals the image must carry: all but the Pulumi packages (`hive render`'s).
    const carried = BUNDLE_EXTERNAL.filter((e) => !e.startsWith("@pulumi/"));
    expect(carried).toEqual(["koffi"]);
    const build = stages.find((s) => s.name === "build") as Stage;
    const bundling = build.instructions.find((i) => i.op === "RUN" && /\bnpm run bundle\b/.test(i.args));
    // koffi and its platform binaries' scope, copied aside; the final stage takes node_modules from there.
    expect(bundling?.args).toMatch(/cp -R node_modules\/koffi node_modules\/@koromix \/out\/node_modules\//);
    const modules = copies(final).filter((c) => c.dest.startsWith("node_modules"));
    expect(modules.map((c) => [c.from, c.sources])).toEqual([["build", ["/out/node_modules/"]]]);
  });

  it("copies only paths that exist in the build context and that .dockerignore lets through", () => {
    const sources = stages.flatMap((s) =>
      copies(s)
        .filter((c) => c.from === undefined)
        .flatMap((c) => c.sources),
    );
    expect(sources.length).toBeGreaterThan(0);
    for (const source of sources) {
      expect(existsSync(join(root, source)), `${source} exists`).toBe(true);
      expect(dockerignored(source), `${source} is not in .dockerignore`).toBe(false);
    }
  });

  it("gives the build stage every folder the bundle reads", () => {
    const build = stages.find((s) =>
      s.instructions.some((i) => i.op === "RUN" && /\bnpm run bundle\b/.test(i.args)),
    );
    const copied = copies(build as Stage).flatMap((c) => c.sources.map((src) => src.replace(/\/$/, "")));
    const config = JSON.parse(read("tsconfig.build.json"));
    for (const dir of config.include as string[]) expect(copied, `COPY ${dir}/`).toContain(dir);
    for (const file of ["package.json", "package-lock.json", "tsconfig.json", "tsconfig.build.json"]) {
      expect(copied, `COPY ${file}`).toContain(file);
    }
  });

  it("copies from earlier stages only what those stages provide", () => {
    for (const stage of stages) {
      for (const c of copies(stage).filter((x) => x.from !== undefined)) {
        const source = stages.find((s) => s.name === c.from);
        expect(source, `stage ${c.from}`).toBeDefined();
        const has = provided(source as Stage);
        for (const path of c.sources) {
          const wanted = path.replace(/\/$/, "");
          expect(
            has.some((p) => wanted === p || wanted.startsWith(`${p}/`)),
            `${c.from}:${path} in ${has.join(", ")}`,
          ).toBe(true);
        }
      }
    }
  });

  it("enters through the bundled `hive` command, whose first argument the DaemonSet supplies", () => {
    const json = (op: string) => JSON.parse(final.instructions.find((i) => i.op === op)?.args ?? "null");
    const entrypoint = json("ENTRYPOINT") as string[];
    expect([...entrypoint, ...json("CMD")]).toEqual(["node", `${BUNDLE_OUT}/hive.mjs`, "agent"]);
    // dist/agent/hive.mjs is what the bundle makes of runtime/cli/main.ts, the package's bin.
    expect(read("scripts/bundle-agent.ts")).toMatch(/^\s*hive: "runtime\/cli\/main\.ts",$/m);
    expect(JSON.parse(read("package.json")).bin.hive).toBe("dist/runtime/cli/main.js");
    // The DaemonSet's args replace CMD, so they must start with the same command.
    const ds = renderManifests(MINIMAL).find((o) => o.kind === "DaemonSet") as unknown as {
      spec: { template: { spec: { containers: { args: string[]; command?: string[] }[] } } };
    };
    const container = ds.spec.template.spec.containers[0];
    expect(container?.command).toBeUndefined();
    expect(container?.args[0]).toBe("agent");
  });

  it("names a command the CLI actually has: `hive agent`", () => {
    // The command table of runtime/cli/main.ts: `name: { summary, load }` entries.
    expect(read("runtime/cli/main.ts")).toMatch(/^\s*agent:\s*\{/m);
  });
});
