/**
 * Shared pieces of the alert tests: kernel events and watched-file records as the loader
 * would hand them over, a schema validator built from the one Alert definition, a logger
 * that captures its lines, and metric readers.
 */
import { Ajv } from "ajv";
import type { Counter } from "prom-client";
import { AlertSchema } from "../../api/alert.ts";
import { FORMATS } from "../../api/formats.ts";
import { LABEL_TRAP_ID } from "../../api/meta.ts";
import type { AlertSource } from "../../runtime/alerts/alert-source.ts";
import type { AllowFiles } from "../../runtime/alerts/allowlist.ts";
import { type AlertPipelineConfig, createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import type { ExecProvenance, FileKey, KernelEvent, ProcessIdentity } from "../../runtime/kernel/contract.ts";
import { createLogger, type Logger } from "../../runtime/log.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";

const ajv = new Ajv({ allErrors: true, strict: false });
for (const [name, check] of Object.entries(FORMATS)) ajv.addFormat(name, check);
const validate = ajv.compile(AlertSchema);

/** Throws with ajv's messages when `value` is not a valid Alert. */
export function assertValidAlert(value: unknown): void {
  if (!validate(value))
    throw new Error(
      `alert does not match the schema: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value)}`,
    );
}

export const KERNEL_ID = "0d9f5c1e-3b7a-4c2e-9f1d-2a6b8c4e0f11";

export function makeEvent(n: number, overrides: Partial<KernelEvent> = {}): KernelEvent {
  return {
    ktimeNs: process.hrtime.bigint(),
    key: { major: 259, minor: 1, ino: 131_073n },
    mask: 0x24,
    accesses: ["read", "open"],
    kind: "file",
    slot: 3,
    pid: 4_000 + n,
    tgid: 4_000 + n,
    uid: 0,
    gid: 0,
    comm: "cat",
    cgroupId: 9_876n,
    count: 3,
    process: {
      exe: { exe: "/usr/bin/cat", source: "exec" },
      execNs: 1_000n,
      nsPid: 7,
      ppid: 3_000,
      parent: { pid: 3_000, comm: "sh", exe: { exe: "/bin/sh", source: "exec" } },
      grandparent: { pid: 2_000, startNs: 500n },
    },
    ...overrides,
  };
}

export function makeSource(
  trapId: string,
  callback?: string,
  overrides: Partial<AlertSource> = {},
): AlertSource {
  return {
    annotations: {
      hive_policy_name: "shadow-watch",
      path: "/etc/shadow",
      pod_name: "nginx-7d9c",
      namespace: "default",
      container_id: "containerd://4f1c2e",
      container_name: "nginx",
      node_name: "node-a",
      pod_ip: "10.0.0.7",
    },
    ...(callback ? { callback } : {}),
    labels: { [LABEL_TRAP_ID]: trapId },
    policyNamespace: "security",
    nodeName: "node-a",
    kernelId: KERNEL_ID,
    ...overrides,
  };
}

/** The test container's overlay: where its image's executables are (and its processes' root). */
export const IMAGE_DEVICE = { major: 0, minor: 40 } as const;
const imageInodes = new Map<string, bigint>();

/** The image's file at `path` in the test container: one inode per path, the same on every call. */
export function imageFile(path: string): FileKey {
  let ino = imageInodes.get(path);
  if (ino === undefined) {
    ino = 1_000n + BigInt(imageInodes.size);
    imageInodes.set(path, ino);
  }
  return { ...IMAGE_DEVICE, ino };
}

/** What discover finds at `paths` in the test container (AlertSource.allowFiles). */
export function imageFiles(paths: Iterable<string>): AllowFiles {
  return new Map([...paths].map((path) => [path, [imageFile(path)]]));
}

/** Provenance of the image's unchanged file at `path`, run with nothing else asked of the loader. */
export function imageProvenance(path: string): ExecProvenance {
  return {
    file: imageFile(path),
    layer: "image",
    loaderEnv: [],
    envUnread: false,
    traced: false,
    forkUnseen: false,
  };
}

/**
 * An honest process as the kernel records it: the image's `exe`, run from the container's root,
 * forked by `parent` (the image's too), which has run nothing else since and is still its parent.
 */
export function imageProcess(exe: string, parent = "/bin/sh"): ProcessIdentity {
  return {
    exe: { exe, source: "exec" },
    provenance: imageProvenance(exe),
    chroot: false,
    rootDev: { ...IMAGE_DEVICE },
    execNs: 1_000n,
    ppid: 3_000,
    parent: {
      pid: 3_000,
      exe: { exe: parent, source: "exec" },
      provenance: imageProvenance(parent),
      chroot: false,
      execedSinceFork: false,
      reparented: false,
    },
  };
}

export interface CapturedLogger {
  logger: Logger;
  lines: Record<string, unknown>[];
}

export function captureLogger(): CapturedLogger {
  const lines: Record<string, unknown>[] = [];
  return { lines, logger: createLogger({}, { level: "debug", sink: (l) => lines.push(JSON.parse(l)) }) };
}

/**
 * An alert pipeline for a test: its own metrics (no process metrics), a captured log, no
 * stdout lines and no rate limit, with `config` on top.
 */
export async function testPipeline(config: Partial<AlertPipelineConfig> = {}) {
  const metrics = createHiveMetrics({ processMetrics: false });
  const { logger, lines: logs } = captureLogger();
  const pipeline = await createAlertPipeline({ logger, metrics, lines: false, rateLimit: false, ...config });
  return { pipeline, metrics, logs };
}

/** Sum of a counter's values whose labels include `labels`. */
export async function counterValue(
  counter: Counter<string>,
  labels: Record<string, string> = {},
): Promise<number> {
  const { values } = await counter.get();
  return values
    .filter((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want))
    .reduce((sum, v) => sum + v.value, 0);
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
