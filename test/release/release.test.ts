/**
 * `npm run release` as CI runs it, from the files a clean clone holds (the image left out: it is
 * built and run by test/image, and `npm run release` takes it from the same script). The files
 * a user installs from are checked as the user meets them: the checksums with `sha256sum -c`,
 * the tarball unpacked into a fresh program and run under Node 22 (from the `node` package of
 * the npm registry, installed into a temporary directory) as well as this Node 24, the install
 * manifests applied to a new cluster's API server (the stand-in) one `kubectl apply` each.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { AppsV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { RELEASE_CONFIG, RELEASE_FILES, RELEASE_IMAGE } from "../../scripts/release.ts";
import { linesOf, runKubectl } from "../cluster/kubectl-run.ts";
import { type RealApi, startRealApi } from "../cluster/real-api.ts";
import { mockedMonitorProgram } from "../component/mocked-program.ts";

const exec = promisify(execFile);
const root = join(import.meta.dirname, "../..");
const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const work = mkdtempSync(join(tmpdir(), "hive-release-test-"));
const out = join(work, "release");
const program = join(work, "program");
const installed = join(program, "node_modules", manifest.name);
const env = { ...process.env, PATH: `${join(root, "node_modules/.bin")}:${process.env.PATH}` };
let node22 = "";
let api: RealApi;

const sh = (file: string, args: string[], cwd: string) =>
  exec(file, args, { cwd, env, maxBuffer: 64 * 1024 * 1024 });
const read = (file: string) => readFileSync(join(out, file), "utf8");
const docs = (yaml: string) => parseAllDocuments(yaml).map((d) => d.toJS());

beforeAll(async () => {
  const nodeDir = join(work, "node22");
  mkdirSync(nodeDir);
  writeFileSync(join(nodeDir, "package.json"), "{}");
  await Promise.all([
    // A new cluster for the install: no Hive kind served until crds.yaml is applied.
    startRealApi().then((started) => {
      api = started;
    }),
    sh("npm", ["run", "--silent", "release", "--", "--skip-image", "--out", out], root),
    // Node 22 as a package of the npm registry, never a dependency of the project.
    sh("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", "node@22"], nodeDir).then(() => {
      node22 = join(nodeDir, "node_modules/.bin/node");
    }),
  ]);
  // A fresh program with the release's tarball, as `npm install ./<tarball>` lays it out, next to
  // links to the declared dependencies (offline: this repository's installed copies).
  mkdirSync(installed, { recursive: true });
  await sh("tar", ["-xzf", join(out, RELEASE_FILES.package), "-C", installed, "--strip-components=1"], work);
  for (const dep of Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies })) {
    const link = join(program, "node_modules", dep);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(root, "node_modules", dep), link);
  }
  writeFileSync(join(program, "package.json"), JSON.stringify({ name: "user-program", private: true }));
}, 300_000);

afterAll(async () => {
  await api?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe("npm run release", () => {
  it("says in --help what each file is and how to install from them", async () => {
    const { stdout } = await sh(process.execPath, ["scripts/release.ts", "--help"], root);
    for (const file of Object.values(RELEASE_FILES)) expect(stdout).toContain(file);
    expect(stdout).toContain(`kubectl apply -f ${RELEASE_FILES.crds}`);
    expect(stdout).toContain(`npm install ./${RELEASE_FILES.package}`);
    expect(stdout).toContain(`ctr -n k8s.io images import ${RELEASE_FILES.image}`);
    expect(stdout).toContain(`ctr -n k8s.io images import ${RELEASE_FILES.imageArm64}`);
  });

  it("writes SHA256SUMS over every other file, which sha256sum -c accepts", async () => {
    const listed = read(RELEASE_FILES.sums)
      .trim()
      .split("\n")
      .map((line) => line.split("  ")[1]);
    const { image, imageArm64, sums, ...built } = RELEASE_FILES;
    expect(listed).toEqual(Object.values(built).sort());
    const { stdout } = await sh("sha256sum", ["-c", RELEASE_FILES.sums], out);
    expect(stdout.trim().split("\n")).toHaveLength(listed.length);
    // A changed byte is caught.
    writeFileSync(join(work, "copy"), read(RELEASE_FILES.crds).replace("hive", "Hive"));
    const sum = read(RELEASE_FILES.sums).replace(`  ${RELEASE_FILES.crds}`, "  ../copy");
    writeFileSync(join(out, "tampered"), sum);
    await expect(sh("sha256sum", ["-c", "tampered"], out)).rejects.toThrow(/did NOT match/);
    rmSync(join(out, "tampered"));
  });

  it("packs the compiled package with the BPF objects of both architectures and the Pulumi plugin", () => {
    for (const object of ["bpf/hive.bpf.o", "bpf/hive.arm64.bpf.o"]) {
      const obj = readFileSync(join(installed, object));
      expect(obj.subarray(0, 4).toString("latin1")).toBe("\x7fELF");
      expect(obj.readUInt16LE(18)).toBe(247); // e_machine EM_BPF
    }
    for (const file of ["dist/component/index.js", "dist/runtime/cli/main.js", "plugin/index.js"])
      expect(readFileSync(join(installed, file)).length, file).toBeGreaterThan(0);
    const plugin = JSON.parse(readFileSync(join(installed, "plugin/package.json"), "utf8"));
    expect(plugin.main).toBe("index.js");
  });

  it("renders crds.yaml and hive.yaml for the documented configuration, the image the archive names", () => {
    expect(read(RELEASE_FILES.config)).toBe(RELEASE_CONFIG);
    const crds = docs(read(RELEASE_FILES.crds));
    expect(crds.map((d) => d.metadata.name).sort()).toEqual([
      "hivedata.hive-operator.com",
      "hivepolicies.hive-operator.com",
    ]);
    const rest = docs(read(RELEASE_FILES.install));
    expect(rest.map((d) => d.kind)).not.toContain("CustomResourceDefinition");
    const ds = rest.find((d) => d.kind === "DaemonSet");
    expect(ds.spec.template.spec.containers.map((c: { image: string }) => c.image)).toEqual([RELEASE_IMAGE]);
    expect(rest.filter((d) => d.kind === "HivePolicy").map((d) => d.spec.traps[0].path)).toEqual([
      "/etc/shadow",
    ]);
  });

  it("installs on a new cluster with kubectl apply of crds.yaml, then of hive.yaml, one pass each", async () => {
    const kubectl = (args: string[]) => runKubectl(api.cp, args);
    // The commands --help gives, on the release's own files.
    const first = kubectl(["apply", "-f", join(out, RELEASE_FILES.crds)]);
    expect(first).toMatchObject({ code: 0, stderr: "" });
    expect(linesOf(first.stdout)).toHaveLength(2);
    const established = kubectl([
      "wait",
      "--for=condition=Established",
      "--timeout=60s",
      "crd/hivepolicies.hive-operator.com",
      "crd/hivedata.hive-operator.com",
    ]);
    expect(established).toMatchObject({ code: 0, stderr: "" });
    const second = kubectl(["apply", "-f", join(out, RELEASE_FILES.install)]);
    expect(second).toMatchObject({ code: 0, stderr: "" });
    const applied = linesOf(second.stdout);
    expect(applied).toHaveLength(docs(read(RELEASE_FILES.install)).length);
    for (const line of applied) expect(line).toMatch(/ created$/);
    const daemonSets = await api.kubeConfig().makeApiClient(AppsV1Api).listDaemonSetForAllNamespaces();
    expect(daemonSets.items.map((d) => d.metadata?.name)).toEqual(["hive-agent"]);
    expect(daemonSets.items[0]?.spec?.template.spec?.containers.map((c) => c.image)).toEqual([RELEASE_IMAGE]);
  });

  it("lists in the SBOM the package and its production dependencies, not the development tools", () => {
    const sbom = JSON.parse(read(RELEASE_FILES.sbom));
    expect(sbom.bomFormat).toBe("CycloneDX");
    expect(sbom.metadata.component).toMatchObject({ name: manifest.name, version: manifest.version });
    const names = new Set(sbom.components.map((c: { name: string }) => c.name));
    for (const dep of Object.keys(manifest.dependencies)) expect(names.has(dep), dep).toBe(true);
    for (const dev of ["vitest", "typescript", "@biomejs/biome", "@pulumi/pulumi"])
      expect(names.has(dev), dev).toBe(false);
    // Each listed package's own dependencies are listed too (a closed set).
    const refs = new Set(sbom.components.map((c: { "bom-ref": string }) => c["bom-ref"]));
    for (const d of sbom.dependencies) for (const r of d.dependsOn) expect(refs.has(r), r).toBe(true);
  });
});

describe("the released package on Node 22", () => {
  it("is allowed by its engines field, the version Pulumi supports beside 24", async () => {
    const { stdout } = await sh(node22, ["--version"], work);
    const [major, minor] = stdout.trim().slice(1).split(".").map(Number);
    expect(major).toBe(22);
    const [, wantMajor, wantMinor] = /^>=(\d+)\.(\d+)$/.exec(manifest.engines.node) ?? [];
    expect(
      major === Number(wantMajor) ? (minor ?? 0) >= Number(wantMinor) : (major ?? 0) > Number(wantMajor),
    ).toBe(true);
  });

  it("runs HiveMonitor from the tarball with Pulumi mocks, and renders the same objects as Node 24", async () => {
    writeFileSync(join(program, "run.mjs"), mockedMonitorProgram(manifest.name, RELEASE_IMAGE));
    const [on22, on24] = await Promise.all([
      sh(node22, ["run.mjs"], program),
      sh(process.execPath, ["run.mjs"], program),
    ]);
    const out = JSON.parse(on22.stdout);
    expect(out.names).toEqual(["default"]);
    expect(out.types).toHaveLength(out.rendered.length + 1);
    expect(out).toEqual(JSON.parse(on24.stdout));
  }, 60_000);

  it("renders the release's hive.yaml with the installed hive command", async () => {
    const { stdout } = await sh(
      node22,
      [
        join(installed, manifest.bin.hive),
        "render",
        "--config",
        join(out, RELEASE_FILES.config),
        "--skip-crds",
      ],
      program,
    );
    expect(stdout).toBe(read(RELEASE_FILES.install));
  }, 60_000);

  it("loads the plugin as the Pulumi host does: require() of its directory, the component classes exported", async () => {
    const script = `const pulumi = require("@pulumi/pulumi");
const { getPulumiComponents } = require("@pulumi/pulumi/provider/experimental");
const plugin = require(${JSON.stringify(join(installed, "plugin"))});
console.log(JSON.stringify({ names: getPulumiComponents(plugin).map((c) => c.name).sort(), component: plugin.HiveMonitor.prototype instanceof pulumi.ComponentResource }));`;
    writeFileSync(join(program, "plugin.cjs"), script);
    const { stdout } = await sh(node22, ["plugin.cjs"], program);
    expect(JSON.parse(stdout)).toEqual({ names: ["HiveMonitor", "HivePolicy"], component: true });
  }, 60_000);
});
