/**
 * The package as a user gets it: `npm run build` (compiled JavaScript and .d.ts — Node
 * refuses to strip types under node_modules), `npm pack`, the tarball unpacked into a fresh
 * program's node_modules next to only the package's declared dependencies, then that
 * program type-checks against the shipped .d.ts and runs HiveMonitor under Node 24 with
 * Pulumi mocks, and the shipped `hive` bin renders the manifests.
 *
 * Everything is offline: the dependencies are linked from this repository's node_modules.
 */
import { execFile } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { mockedMonitorProgram } from "./mocked-program.ts";
import { schemaOf, sourceSchema } from "./plugin-schema.ts";

const exec = promisify(execFile);
const root = join(import.meta.dirname, "../..");
const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const work = mkdtempSync(join(tmpdir(), "hive-package-"));
const staging = join(work, "staging");
const program = join(work, "program");
const installed = join(program, "node_modules", manifest.name);
const env = {
  ...process.env,
  PATH: `${join(root, "node_modules/.bin")}:${process.env.PATH}`,
  npm_config_loglevel: "error",
};

async function sh(file: string, args: string[], cwd: string) {
  return exec(file, args, { cwd, env, maxBuffer: 64 * 1024 * 1024 });
}

let build: { stdout: string; stderr: string; code: number };

beforeAll(async () => {
  // Build with the package's own script into a staging copy, so the repository's dist/ is untouched.
  mkdirSync(staging, { recursive: true });
  build = await sh("npm", ["run", "build", "--", "--outDir", join(staging, "dist")], root)
    .then((r) => ({ ...r, code: 0 }))
    .catch((e) => ({ stdout: e.stdout ?? "", stderr: e.stderr ?? String(e), code: e.code ?? 1 }));
  // The staging copy is built above (into its own dist/): its prepack has nothing to build from.
  const { prepack: _built, ...scripts } = manifest.scripts;
  writeFileSync(join(staging, "package.json"), JSON.stringify({ ...manifest, scripts }, null, 2));
  for (const entry of manifest.files as string[]) {
    if (entry !== "dist" && existsSync(join(root, entry)))
      cpSync(join(root, entry), join(staging, entry), { recursive: true });
  }
  const { stdout } = await sh("npm", ["pack", "--json", "--pack-destination", work], staging);
  const [{ filename }] = JSON.parse(stdout);
  // A fresh program: the tarball unpacked as npm would, plus links to the declared dependencies
  // only — peer dependencies (@pulumi/*) included, as npm installs them and the README's
  // `npm install` line names them.
  mkdirSync(installed, { recursive: true });
  await sh("tar", ["-xzf", join(work, filename), "-C", installed, "--strip-components=1"], work);
  for (const dep of Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies })) {
    const link = join(program, "node_modules", dep);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(root, "node_modules", dep), link);
  }
  writeFileSync(
    join(program, "package.json"),
    JSON.stringify({ name: "user-program", type: "module", private: true }),
  );
}, 600_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the published package", () => {
  it("builds with `npm run build` without a compiler error", () => {
    expect(`${build.stdout}${build.stderr}`.replace(/npm warn.*\n/g, "")).not.toMatch(/error TS\d+/);
    expect(build.code).toBe(0);
  });

  it("ships compiled JavaScript and declarations for its entry points, and no TypeScript sources", () => {
    for (const entry of [
      "dist/component/index.js",
      "dist/component/index.d.ts",
      "dist/component/plugin.js",
      "dist/component/plugin.d.ts",
      "dist/api/index.js",
      "dist/runtime/cli/main.js",
    ]) {
      expect(existsSync(join(installed, entry)), entry).toBe(true);
    }
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
        d.isDirectory() ? files(join(dir, d.name)) : [join(dir, d.name)],
      );
    const sources = files(installed).filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"));
    // plugin/index.ts is never run (the plugin's entry is index.js): Pulumi reads the schema from it.
    expect(sources.map((f) => relative(installed, f))).toEqual(["plugin/index.ts"]);
  });

  it("refers to no TypeScript file from its compiled JavaScript (imports and worker/asset URLs)", () => {
    const offenders: string[] = [];
    const walk = (dir: string) => {
      for (const d of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, d.name);
        if (d.isDirectory()) walk(path);
        else if (d.name.endsWith(".js")) {
          const text = readFileSync(path, "utf8");
          for (const m of text.matchAll(/["'`](\.{1,2}\/[^"'`]*\.ts)["'`]/g))
            offenders.push(`${relative(installed, path)}: ${m[1]}`);
        }
      }
    };
    walk(join(installed, "dist"));
    expect(offenders).toEqual([]);
  });

  it("points the compiled loader at the BPF object where the package ships it", async () => {
    // package.json "files" ships bpf/hive.bpf.o at the package root; the loader's default must find it there.
    expect(manifest.files).toContain("bpf/hive.bpf.o");
    const script = `const m = await import(${JSON.stringify(join(installed, "dist/runtime/kernel/loader.js"))}); console.log(m.DEFAULT_OBJECT_PATH);`;
    const { stdout } = await sh(process.execPath, ["--input-type=module", "-e", script], program);
    expect(stdout.trim()).toBe(join(installed, "bpf/hive.bpf.o"));
  }, 60_000);

  it("type-checks a user's program against the shipped declarations", async () => {
    writeFileSync(
      join(program, "index.ts"),
      `import { HiveMonitor, type HiveMonitorArgs } from "${manifest.name}";
const args: HiveMonitorArgs = { image: "registry.example.com/hive:0.1.0", traps: [{ path: "/etc/shadow", mode: 0o444, create: true, match: { containerName: /app-.*/ } }] };
export const monitor = new HiveMonitor("hive", args);
`,
    );
    writeFileSync(
      join(program, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          module: "nodenext",
          moduleResolution: "nodenext",
          target: "es2024",
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: [],
        },
        files: ["index.ts"],
      }),
    );
    const result = await sh(join(root, "node_modules/.bin/tsc"), ["-p", "tsconfig.json"], program).catch(
      (e) => e,
    );
    expect(`${result.stdout ?? ""}${result.stderr ?? ""}`).toBe("");
  }, 120_000);

  it("runs HiveMonitor under Node 24 from node_modules, with Pulumi mocks", async () => {
    writeFileSync(
      join(program, "run.mjs"),
      mockedMonitorProgram(manifest.name, "registry.example.com/hive:0.1.0"),
    );
    const { stdout } = await sh(process.execPath, ["run.mjs"], program);
    const out = JSON.parse(stdout);
    expect(out.names).toEqual(["default"]);
    expect(out.types).toContain("hive:index:HiveMonitor");
    expect(out.types).toContain("kubernetes:apps/v1:DaemonSet");
    expect(out.types).toContain("kubernetes:hive-operator.com/v1alpha1:HivePolicy");
    // One Pulumi resource per rendered object, plus the component itself.
    expect(out.types).toHaveLength(out.rendered.length + 1);
  }, 60_000);

  it("builds dist/ before every pack or publish, so a clean clone never ships without it", () => {
    expect(manifest.scripts.prepack).toBe("npm run build");
    expect(manifest.scripts.build).toContain("tsconfig.build.json");
  });

  it("runs a program with an image Output and a secret callback, the secret never in plain text", async () => {
    writeFileSync(
      join(program, "secrets.mjs"),
      `import * as pulumi from "@pulumi/pulumi";
const registered = [];
pulumi.runtime.setMocks({ newResource: (a) => { registered.push(a); return { id: a.name, state: a.inputs }; }, call: (a) => a.inputs }, "p", "s", false);
const { HiveMonitor } = await import("${manifest.name}");
const image = pulumi.output(new Promise((r) => setTimeout(() => r("registry.example.com/hive:0.1.0"), 5)));
const m = new HiveMonitor("hive", { image, callback: pulumi.secret("https://alerts.example.com/hive?token=s3cr3t") });
const name = await new Promise((r) => m.daemonSetName.apply(r));
await new Promise((r) => setTimeout(r, 300));
const ds = registered.find((a) => a.type === "kubernetes:apps/v1:DaemonSet");
const isSecret = (v) => v?.[pulumi.runtime.specialSigKey] === pulumi.runtime.specialSecretSig;
// Every registered input field holding the secret must be a secret as a whole.
const plain = registered.flatMap((a) => Object.entries(a.inputs).filter(([, v]) => !isSecret(v) && JSON.stringify(v).includes("s3cr3t")).map(([k]) => a.type + "." + k));
console.log(JSON.stringify({ name, specSecret: isSecret(ds.inputs.spec), plain, image: JSON.stringify(ds.inputs.spec).includes("registry.example.com/hive:0.1.0") }));
`,
    );
    const { stdout } = await sh(process.execPath, ["secrets.mjs"], program);
    const out = JSON.parse(stdout);
    expect(out.name).toBe("hive-agent");
    expect(out.specSecret).toBe(true);
    expect(out.plain).toEqual([]);
    expect(out.image).toBe(true);
  }, 60_000);

  it("serves, through the Pulumi plugin, the schema its sources describe", async () => {
    // plugin/ as the package ships it, inside the installed package (`pulumi package add
    // ./node_modules/@hive-operator/hive/plugin`): its components from the package's own dist/.
    const [packaged, sources] = await Promise.all([schemaOf(join(installed, "plugin")), sourceSchema()]);
    expect(Object.keys(packaged.resources).sort()).toEqual([
      "hive:index:HiveMonitor",
      "hive:index:HivePolicy",
    ]);
    expect(packaged).toEqual(sources);
  }, 180_000);

  it("installs a `hive` bin that renders the quick-start manifests", async () => {
    const bin = join(installed, manifest.bin.hive);
    const config = join(program, "hive.yaml");
    writeFileSync(
      config,
      "callback: { url: https://alerts.example.com/hive }\ntraps:\n  - path: /etc/shadow\n    match: { matchLabels: { security: high } }\n",
    );
    const { stdout } = await sh(
      process.execPath,
      [bin, "render", "--config", config, "--image", "registry.example.com/hive:0.1.0"],
      program,
    );
    const kinds = parseAllDocuments(stdout).map((d) => d.toJS().kind);
    expect(kinds).toContain("DaemonSet");
    expect(kinds).toContain("HivePolicy");
  }, 60_000);
});
