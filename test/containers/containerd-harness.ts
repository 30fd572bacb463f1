/**
 * A private containerd for tests: its own root, state and socket under a temporary
 * directory, the CRI plugin disabled (no images or CNI here), containers run by `ctr` from
 * a local rootfs made of busybox-static. Needs root; `requireRoot` skips loudly when not
 * root, and fails under CI=true so a CI run can never pass without exercising containers.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { type Availability, rootWithBinaries, suiteGate } from "../fixtures/suite-gate.ts";

const run = promisify(execFile);

export function containersAvailable(): Availability {
  return rootWithBinaries(
    ["/usr/bin/containerd", "/usr/bin/ctr", "/usr/sbin/runc", "/bin/busybox"],
    "containerd and runc need root",
  );
}

/** Under CI the absence of containers is a failure; locally a loud skip. */
export function containerSuiteGate(): boolean {
  return suiteGate("REAL-CONTAINER TESTS", containersAvailable());
}

export interface Containerd {
  dir: string;
  socket: string;
  namespace: string;
  /** Makes a rootfs with busybox and the given files (path → content); returns its directory. */
  makeRootfs(name: string, files?: Record<string, string>): string;
  /** Starts `sleep 1000` (or `args`) in a new container; resolves when its task runs. */
  start(id: string, rootfs: string, args?: string[]): Promise<void>;
  exec(id: string, args: string[]): Promise<string>;
  remove(id: string): Promise<void>;
  /** Kills the daemon (its containers' shims keep running) and waits for it to exit. */
  kill(): Promise<void>;
  /** Starts the daemon again on the same state and socket (after `kill`). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * `namespace`: the containerd namespace containers are made in (the kubelet's is k8s.io).
 * `startTimeoutMs`: how long containerd may take to open its socket (emulated guests sharing
 * host CPUs need minutes).
 */
/**
 * A private containerd's configuration under `dir` (content, snapshots and state there, its
 * socket at `socket`), without the CRI plugin, which would look for CNI and write to system
 * paths. Returns the file's path.
 */
/** `root`: containerd's root under `dir` (default `root`; k3s's would be `var/lib/rancher/k3s/agent/containerd`). */
export function writeContainerdConfig(dir: string, socket: string, root = "root"): string {
  const config = join(dir, "config.toml");
  writeFileSync(
    config,
    [
      "version = 2",
      `root = "${dir}/${root}"`,
      `state = "${dir}/state"`,
      'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
      "[grpc]",
      `  address = "${socket}"`,
      "",
    ].join("\n"),
  );
  return config;
}

export async function startContainerd(
  options: { namespace?: string; startTimeoutMs?: number; root?: string } = {},
): Promise<Containerd> {
  const dir = mkdtempSync(join(tmpdir(), "hive-containerd-"));
  const socket = join(dir, "containerd.sock");
  const config = writeContainerdConfig(dir, socket, options.root);
  let log = "";
  const launch = async (): Promise<ChildProcess> => {
    const child: ChildProcess = spawn("/usr/bin/containerd", ["--config", config], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    child.stderr?.on("data", (b: Buffer) => {
      log = (log + b.toString()).slice(-4000);
    });
    const deadline = Date.now() + (options.startTimeoutMs ?? 15_000);
    while (!existsSync(socket)) {
      if (child.exitCode !== null || Date.now() > deadline)
        throw new Error(`containerd did not start: ${log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return child;
  };
  let daemon = await launch();
  const killDaemon = async () => {
    if (daemon.exitCode !== null || daemon.signalCode !== null) return;
    daemon.kill("SIGKILL");
    await new Promise((r) => daemon.once("exit", r));
    // A killed containerd leaves its socket behind; the next one must not be taken as up before it listens.
    rmSync(socket, { force: true });
  };
  const namespace = options.namespace ?? "default";
  const ctr = (args: string[]) =>
    run("/usr/bin/ctr", ["--address", socket, "--namespace", namespace, ...args]);
  const ids = new Set<string>();
  async function remove(id: string): Promise<void> {
    await ctr(["task", "kill", "-s", "SIGKILL", id]).catch(() => undefined);
    for (let i = 0; i < 50; i++) {
      const r = await ctr(["task", "rm", id]).then(
        () => true,
        () => false,
      );
      if (r) break;
      await new Promise((res) => setTimeout(res, 50));
    }
    await ctr(["container", "rm", id]).catch(() => undefined);
    ids.delete(id);
  }
  return {
    dir,
    socket,
    namespace,
    makeRootfs(name, files = {}) {
      const rootfs = join(dir, "rootfs", name);
      for (const d of ["bin", "etc", "proc", "dev", "sys", "tmp"])
        mkdirSync(join(rootfs, d), { recursive: true });
      copyFileSync("/bin/busybox", join(rootfs, "bin", "busybox"));
      for (const tool of ["sh", "sleep", "mv", "rm", "cat", "ln", "stat", "touch"])
        symlinkSync("busybox", join(rootfs, "bin", tool));
      for (const [path, content] of Object.entries(files)) {
        mkdirSync(join(rootfs, path, ".."), { recursive: true });
        writeFileSync(join(rootfs, path), content);
      }
      return rootfs;
    },
    async start(id, rootfs, args = ["/bin/busybox", "sleep", "1000"]) {
      await ctr(["run", "-d", "--rootfs", rootfs, id, ...args]);
      ids.add(id);
    },
    async exec(id, args) {
      const { stdout } = await ctr([
        "task",
        "exec",
        "--exec-id",
        `e${Date.now()}${Math.random().toString(16).slice(2, 6)}`,
        id,
        ...args,
      ]);
      return stdout;
    },
    remove,
    kill: killDaemon,
    async restart() {
      await killDaemon();
      daemon = await launch();
    },
    async stop() {
      for (const id of [...ids]) await remove(id);
      daemon.kill("SIGTERM");
      await new Promise((r) =>
        daemon.exitCode !== null || daemon.signalCode !== null ? r(null) : daemon.once("exit", r),
      );
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
