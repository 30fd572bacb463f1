/** What the build reads from the Dockerfile: the base images its ARG defaults name. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { StepError } from "./run.ts";
import { root } from "./settings.ts";

/** `ARG NAME=default` lines before the first FROM. */
function dockerfileArgs(): Record<string, string> {
  const args: Record<string, string> = {};
  for (const line of readFileSync(join(root, "Dockerfile"), "utf8").split("\n")) {
    if (/^\s*FROM\s/i.test(line)) break;
    const m = /^\s*ARG\s+(\w+)=(\S+)/i.exec(line);
    if (m?.[1] && m[2]) args[m[1]] = m[2];
  }
  return args;
}

/** How buildah names a short reference: `debian:x` → `docker.io/library/debian:x`. */
function normalise(ref: string): string {
  const [first = "", ...rest] = ref.split("/");
  if (rest.length === 0) return `docker.io/library/${ref}`;
  if (!/[.:]/.test(first) && first !== "localhost") return `docker.io/${ref}`;
  return ref;
}

export interface BaseImageNames {
  /** The Debian image's normalised name, and its suite (`bookworm`). */
  debianName: string;
  suite: string;
  /** The Node image's normalised name, and its Node major version (`24`). */
  nodeName: string;
  major: string;
}

/** The two base images, named as buildah stores them; the stand-ins are tagged with exactly these. */
export function baseImageNames(): BaseImageNames {
  const args = dockerfileArgs();
  const debianName = normalise(args.DEBIAN_IMAGE ?? "");
  const nodeName = normalise(args.NODE_IMAGE ?? "");
  // debian:bookworm-slim → suite bookworm; node:24-bookworm-slim → Node 24 on that suite.
  const suite = /:([a-z]+)-slim$/.exec(debianName)?.[1];
  const nodeTag = /:(\d+)-([a-z]+)-slim$/.exec(nodeName);
  if (!suite || !nodeTag?.[1] || nodeTag[2] !== suite)
    throw new StepError(
      `step "reading the Dockerfile" failed: ARG DEBIAN_IMAGE=${args.DEBIAN_IMAGE} and NODE_IMAGE=${args.NODE_IMAGE} are not debian:SUITE-slim and node:MAJOR-SUITE-slim`,
    );
  return { debianName, suite, nodeName, major: nodeTag[1] };
}
