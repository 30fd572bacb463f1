/**
 * The real Kubernetes and Pulumi programs the tests run, built from their own Go modules.
 *
 * Each set is a Go module of ours under test/cluster/go/<set>/ (go.mod + go.sum + tools.go, or a
 * main of ours) that requires the upstream module at a pinned version and repeats its `replace`
 * directives; no source of another project is committed. `build-binaries.ts` compiles a set into a cache directory
 * outside the repository whose name carries the pinned version and a hash of the module files, so
 * a machine builds each version once and a changed pin builds afresh.
 */
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export interface BinarySet {
  /** Directory name under test/cluster/go/. */
  name: string;
  /** The upstream module whose version names the cache directory. */
  module: string;
  /** Main packages to build, and the binary each becomes (Go names it after the last element). */
  packages: string[];
  binaries: string[];
  /** Build tags, when the default set pulls in cgo-only parts. */
  tags?: string[];
  /** Linker -X settings (the version a program reports of itself). */
  versionVars?: Record<string, string>;
  /** Files a main package embeds that the module zip lacks (paths relative to the module), produced before the build. */
  generated?: (moduleDir: string, version: string) => Record<string, string>;
}

const here = import.meta.dirname;
export const GO_MODULES_DIR = join(here, "go");

/** The pulumi-kubernetes provider embeds its schema with the release version set (its generate.go). */
function providerEmbeds(moduleDir: string, version: string): Record<string, string> {
  const cmd = join("cmd", "pulumi-resource-kubernetes");
  const schema = JSON.parse(readFileSync(join(moduleDir, cmd, "schema.json"), "utf8"));
  schema.version = version;
  const mapping = JSON.parse(readFileSync(join(moduleDir, cmd, "terraform-mapping.json"), "utf8"));
  return {
    [join(cmd, "schema-embed.json")]: JSON.stringify(schema),
    [join(cmd, "terraform-mapping-embed.json")]: JSON.stringify(mapping),
  };
}

/** The release the provider module's pseudo-version points at (the module has no own tags). */
export const PULUMI_KUBERNETES_RELEASE = "4.25.0";

export const BINARY_SETS: BinarySet[] = [
  {
    name: "etcd",
    module: "go.etcd.io/etcd/server/v3",
    packages: ["go.etcd.io/etcd/server/v3"],
    binaries: ["server"],
  },
  {
    name: "kubernetes",
    module: "k8s.io/kubernetes",
    packages: ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl"].map(
      (c) => `k8s.io/kubernetes/cmd/${c}`,
    ),
    binaries: ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl"],
    versionVars: {
      "k8s.io/component-base/version.gitVersion": "$VERSION",
      "k8s.io/component-base/version.gitMajor": "1",
      "k8s.io/component-base/version.gitMinor": "$MINOR",
      "k8s.io/client-go/pkg/version.gitVersion": "$VERSION",
    },
  },
  {
    name: "pulumi",
    module: "github.com/pulumi/pulumi/pkg/v3",
    packages: ["github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"],
    binaries: ["pulumi"],
    versionVars: { "github.com/pulumi/pulumi/sdk/v3/go/common/version.Version": "$VERSION" },
  },
  {
    // Our own main over Pulumi's Python code generator (pulumi package gen-sdk asks the Python
    // language host for it, which the module proxy does not serve): the README's Python SDK.
    name: "pulumi-codegen",
    module: "github.com/pulumi/pulumi/pkg/v3",
    packages: ["hive.test/cluster/pulumi-codegen"],
    binaries: ["pulumi-codegen"],
  },
  {
    // Its own module: pulumi-yaml builds against the pulumi/pkg it requires, not the CLI's newer one.
    name: "pulumi-yaml",
    module: "github.com/pulumi/pulumi-yaml",
    packages: ["github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml"],
    binaries: ["pulumi-language-yaml"],
  },
  {
    name: "pulumi-kubernetes",
    module: "github.com/pulumi/pulumi-kubernetes/provider/v4",
    packages: ["github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes"],
    binaries: ["pulumi-resource-kubernetes"],
    versionVars: {
      "github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version": PULUMI_KUBERNETES_RELEASE,
    },
    generated: (dir) => providerEmbeds(dir, PULUMI_KUBERNETES_RELEASE),
  },
  {
    name: "containerd",
    module: "github.com/containerd/containerd/v2",
    packages: ["containerd", "containerd-shim-runc-v2", "ctr"].map(
      (c) => `github.com/containerd/containerd/v2/cmd/${c}`,
    ),
    binaries: ["containerd", "containerd-shim-runc-v2", "ctr"],
    versionVars: { "github.com/containerd/containerd/v2/version.Version": "$VERSION" },
  },
];

/** etcd's main is its module root, so Go names the binary after the module's major version. */
export const RENAMES: Record<string, string> = { server: "etcd" };

/** The version of `module` the set's go.mod requires. */
export function pinnedVersion(set: BinarySet): string {
  const gomod = readFileSync(join(GO_MODULES_DIR, set.name, "go.mod"), "utf8");
  const m = gomod.match(
    new RegExp(`^\\s*(?:require\\s+)?${set.module.replaceAll(".", "\\.")}\\s+(v\\S+)`, "m"),
  );
  if (!m) throw new Error(`test/cluster/go/${set.name}/go.mod requires no ${set.module}`);
  return m[1] as string;
}

/** Root of the binary cache: $HIVE_BIN_CACHE, else $XDG_CACHE_HOME/hive/go-bin, else ~/.cache/hive/go-bin. */
export function cacheRoot(): string {
  const env = process.env;
  return env.HIVE_BIN_CACHE ?? join(env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "hive", "go-bin");
}

/** The set's cache directory: `<set>-<version>-<hash of its module files>`. */
export function setDir(set: BinarySet): string {
  const hash = createHash("sha256");
  // Every file of the set's module (go.mod, go.sum, tools.go, a main of ours), in name order.
  const dir = join(GO_MODULES_DIR, set.name);
  for (const f of readdirSync(dir).sort()) hash.update(readFileSync(join(dir, f)));
  hash.update(JSON.stringify({ tags: set.tags, vars: set.versionVars }));
  return join(cacheRoot(), `${set.name}-${pinnedVersion(set)}-${hash.digest("hex").slice(0, 12)}`);
}

export function isBuilt(set: BinarySet): boolean {
  return set.binaries.every((b) => existsSync(join(setDir(set), RENAMES[b] ?? b)));
}

/** Absolute path of one built program, or an error that says how to build it. */
export function binaryPath(program: string): string {
  for (const set of BINARY_SETS) {
    const names = set.binaries.map((b) => RENAMES[b] ?? b);
    if (!names.includes(program)) continue;
    const path = join(setDir(set), program);
    if (!existsSync(path)) {
      throw new Error(
        `${program} is not built (${path}); build it with: node test/cluster/build-binaries.ts ${set.name}`,
      );
    }
    return path;
  }
  throw new Error(`no binary set builds ${program}`);
}

/** Directory holding a set's programs (for PATH). */
export function binaryDir(setName: string): string {
  const set = BINARY_SETS.find((s) => s.name === setName);
  if (!set) throw new Error(`unknown binary set ${setName}`);
  return setDir(set);
}
