/**
 * What identifies a Hive build: the package's version, the compiled kernel program (by its
 * content: bpf/hive.bpf.o carries no version of its own, and an image or a clone may hold a
 * rebuilt one), the Node.js running it, and the attach modes the agent may pick from. Shown by
 * `hive version` and exported as hive_build_info.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { PACKAGE_VERSION } from "../api/version.ts";
import { ATTACH_MODES, type AttachMode } from "./kernel/contract.ts";
import { DEFAULT_OBJECT_PATH } from "./kernel/object-path.ts";

export interface BuildInfo {
  /** The npm package's version (package.json). */
  version: string;
  /** `sha256:` and the first 12 hex digits of the object's SHA-256; `missing` or `unreadable` otherwise. */
  program: string;
  /** The object file that `program` names. */
  programPath: string;
  /** `process.version`, e.g. `v24.9.0`. */
  nodeVersion: string;
  /** Every mode the agent may attach the program by; it picks one per kernel (`--attach-mode`). */
  attachModes: readonly AttachMode[];
}

/** Hex digits of the digest shown: enough to tell builds apart, short enough for a label. */
const PROGRAM_DIGEST_CHARS = 12;

/** The compiled program's identity: its content's digest, or why there is none. */
export function programId(objectPath: string = DEFAULT_OBJECT_PATH): string {
  let bytes: Buffer;
  try {
    bytes = readFileSync(objectPath);
  } catch (error) {
    // Not built (a clone before `sh bpf/build.sh`) is an answer, not a failure of the caller.
    return (error as NodeJS.ErrnoException).code === "ENOENT" ? "missing" : "unreadable";
  }
  return `sha256:${createHash("sha256").update(bytes).digest("hex").slice(0, PROGRAM_DIGEST_CHARS)}`;
}

export function buildInfo(objectPath: string = DEFAULT_OBJECT_PATH): BuildInfo {
  return {
    version: PACKAGE_VERSION,
    program: programId(objectPath),
    programPath: objectPath,
    nodeVersion: process.version,
    attachModes: ATTACH_MODES,
  };
}
