/**
 * The release's SBOM: `npm sbom`'s CycloneDX document kept to what a user's `npm install` of
 * the package brings — the package and the closure of its `dependencies` and
 * `optionalDependencies` in package-lock.json. (`npm sbom --omit dev --package-lock-only`
 * drops production packages that a development tool also uses, e.g. `yaml` and
 * `@grpc/grpc-js`, so the closure is computed here from the lock instead.) Peer dependencies
 * (@pulumi/*) are the user's program's own and are not listed.
 */

interface LockPackage {
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}
interface Lock {
  packages: Record<string, LockPackage>;
}
interface Component {
  "bom-ref": string;
  name: string;
  version?: string;
}
interface CycloneDx {
  metadata: { component: Component };
  components: Component[];
  dependencies?: { ref: string; dependsOn?: string[] }[];
}

/** Where Node finds `name` required from the lock entry at `from` (`""` is the root). */
function resolveIn(lock: Lock, from: string, name: string): string | undefined {
  for (let dir = from; ; ) {
    const candidate = `${dir === "" ? "" : `${dir}/`}node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
    if (dir === "") return undefined;
    const cut = dir.lastIndexOf("/node_modules/");
    dir = cut === -1 ? "" : dir.slice(0, cut);
  }
}

/** `name@version` of every package a production install of the root brings. */
export function productionRefs(lock: Lock): Set<string> {
  const seen = new Set<string>();
  const queue = [""];
  while (queue.length > 0) {
    const at = queue.shift() as string;
    const entry = lock.packages[at] ?? {};
    for (const name of Object.keys({ ...entry.dependencies, ...entry.optionalDependencies })) {
      const found = resolveIn(lock, at, name);
      if (found !== undefined && !seen.has(found)) {
        seen.add(found);
        queue.push(found);
      }
    }
  }
  return new Set(
    [...seen].map(
      (path) => `${path.slice(path.lastIndexOf("node_modules/") + 13)}@${lock.packages[path]?.version}`,
    ),
  );
}

export function productionSbom(
  sbom: CycloneDx,
  lock: Lock,
  pkg: { name: string; version: string },
): CycloneDx {
  const keep = productionRefs(lock);
  const self = `${pkg.name}@${pkg.version}`;
  return {
    ...sbom,
    // npm names the root component after the directory it ran in; it is the package.
    metadata: {
      ...sbom.metadata,
      component: {
        ...sbom.metadata.component,
        name: pkg.name, // as npm names every other component: scope included, no group
        "bom-ref": self,
        version: pkg.version,
      },
    },
    components: sbom.components.filter((c) => keep.has(c["bom-ref"])),
    dependencies: (sbom.dependencies ?? [])
      .filter((d) => d.ref === self || keep.has(d.ref))
      .map((d) => ({ ...d, dependsOn: (d.dependsOn ?? []).filter((r) => keep.has(r)) })),
  };
}
