/**
 * The agent image for tests: built from the Dockerfile by scripts/build-image.ts (no Docker,
 * no registry), once per test process and only when its inputs changed since the last build.
 * Needs root, buildah and mmdebstrap; `imageSuiteGate` skips loudly without them, and fails
 * under CI=true so that a CI run can never pass without building the image.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { AgentImageInfo } from "../../scripts/build-image.ts";
import { type Availability, rootWithBinaries, suiteGate } from "../fixtures/suite-gate.ts";

export type { AgentImageInfo };

const root = join(import.meta.dirname, "../..");
const SCRIPT = join(root, "scripts/build-image.ts");
export const AGENT_IMAGE_INFO = join(root, ".tmp/image/hive-agent.json");
/** The linux/arm64 image's (`npm run image -- --arm64`, scripts/image-arm64.ts). */
export const ARM64_IMAGE_INFO = join(root, ".tmp/image/hive-agent-arm64.json");

export function imageBuildAvailable(): Availability {
  return rootWithBinaries(
    ["/usr/bin/buildah", "/usr/bin/mmdebstrap"],
    "buildah (vfs, chroot isolation) needs root",
  );
}

/** Under CI a missing prerequisite is a failure; locally a loud skip. */
export function imageSuiteGate(): boolean {
  return suiteGate("AGENT IMAGE TESTS", imageBuildAvailable());
}

const pending = new Map<string, Promise<AgentImageInfo>>();

/**
 * Builds the image (or finds it up to date) and returns what .tmp/image/hive-agent.json says
 * about it (hive-agent-arm64.json for the arm64 image, which needs the amd64 one built first:
 * the script builds both). The script's progress goes to stderr; a failure carries its last lines.
 */
export function ensureAgentImage(arch: "amd64" | "arm64" = "amd64"): Promise<AgentImageInfo> {
  const infoPath = arch === "arm64" ? ARM64_IMAGE_INFO : AGENT_IMAGE_INFO;
  const args = arch === "arm64" ? [SCRIPT, "--arm64"] : [SCRIPT];
  const known = pending.get(arch);
  if (known) return known;
  const building = new Promise<AgentImageInfo>((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let tail = "";
    const forward = (b: Buffer) => {
      process.stderr.write(b);
      tail = (tail + b.toString()).slice(-4000);
    };
    child.stdout.on("data", forward);
    child.stderr.on("data", forward);
    child.on("error", (e) => reject(new Error(`cannot run ${SCRIPT}: ${e.message}`)));
    child.on("close", (code) => {
      if (code !== 0) {
        reject(new Error(`scripts/build-image.ts exited with ${code}:\n${tail}`));
        return;
      }
      try {
        resolve(JSON.parse(readFileSync(infoPath, "utf8")) as AgentImageInfo);
      } catch (e) {
        reject(new Error(`the build succeeded but ${infoPath} is unreadable: ${(e as Error).message}`));
      }
    });
  });
  pending.set(arch, building);
  return building;
}
