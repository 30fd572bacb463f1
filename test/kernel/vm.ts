/**
 * Boots a stock Debian kernel under QEMU (TCG, no KVM needed): amd64 kernels in
 * qemu-system-x86_64 with the host's root filesystem shared read-only over 9p, arm64 kernels in
 * qemu-system-aarch64 (`-M virt`) with an arm64 tree of the host's shared instead (`rootfs`);
 * a tmpfs-backed overlay on top. Runs one shell command inside and returns what it printed.
 * Reusable by any suite or demo that needs a real kernel: `bootVm({ kernel, command, env, timeoutMs })`.
 *
 * Boot: an initramfs per kernel (the kernel's architecture's static busybox + the modules 9p
 * and overlay need, resolved from modules.dep) mounts the share, switches root, mounts
 * proc/sys/bpffs/tracefs/cgroup2, and runs the command from a second, writable 9p share that
 * also receives its output.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { HiveError } from "../../api/errors.ts";

export const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url)).replace(/\/$/, "");
/** Initramfs images and per-boot shared directories live here (inside the repository's .tmp/). */
export const WORK_DIR = join(REPO_ROOT, ".tmp", "vm");
export const KERNEL_CACHE = process.env.HIVE_KERNEL_CACHE ?? "/var/cache/hive-kernels";

/** How QEMU runs each guest architecture (TCG: the host is amd64). */
export const GUEST_ARCHES = {
  amd64: {
    qemu: "qemu-system-x86_64",
    debianPackage: "qemu-system-x86",
    machine: ["-machine", "accel=tcg", "-cpu", "max"],
    console: "ttyS0",
  },
  arm64: {
    qemu: "qemu-system-aarch64",
    debianPackage: "qemu-system-arm",
    // pauth-impdef: QEMU's own pointer-authentication hash; the architected one (QARMA) is
    // several times slower to emulate, and the guest cannot tell.
    machine: ["-machine", "virt,accel=tcg", "-cpu", "max,pauth-impdef=on"],
    console: "ttyAMA0",
  },
} as const;
export type GuestArch = keyof typeof GUEST_ARCHES;

export interface KernelImage {
  /** "6.1", "6.12", "5.10" */
  series: string;
  /** Default amd64. */
  arch?: GuestArch;
  /** The static busybox of the kernel's architecture for its initramfs (default /bin/busybox, the host's). */
  busybox?: string;
  /** uname -r of the kernel */
  version: string;
  vmlinuz: string;
  /** Directory holding lib/modules/<version> ("/" for the host's installed kernel). */
  root: string;
}

/** The kernels the suite boots: the installed 6.1 and those fetch-kernels.sh unpacked. */
export function findKernels(): { found: KernelImage[]; missing: string[] } {
  const found: KernelImage[] = [];
  const missing: string[] = [];
  const fromRoot = (series: string, root: string, pattern: RegExp) => {
    const boot = join(root, "boot");
    const image = existsSync(boot) ? readdirSync(boot).find((f) => pattern.test(f)) : undefined;
    const version = image?.replace(/^vmlinuz-/, "");
    if (!image || !version || !existsSync(join(root, "lib/modules", version, "modules.dep"))) {
      missing.push(series);
      return;
    }
    found.push({ series, version, vmlinuz: join(boot, image), root });
  };
  fromRoot("6.1", "/", /^vmlinuz-6\.1\.\d+-\d+-amd64$/);
  fromRoot("6.12", join(KERNEL_CACHE, "6.12"), /^vmlinuz-6\.12\./);
  fromRoot("5.10", join(KERNEL_CACHE, "5.10"), /^vmlinuz-5\.10\./);
  return { found, missing };
}

/**
 * The arm64 kernel (bookworm's linux-image-arm64, 6.1) and arm64 busybox that
 * `sh test/kernel/fetch-kernels.sh arm64` unpacked, or why it is not there.
 */
export function findArm64Kernel(): KernelImage | string {
  const root = join(KERNEL_CACHE, "arm64-6.1");
  const boot = join(root, "boot");
  const image = existsSync(boot)
    ? readdirSync(boot).find((f) => /^vmlinuz-6\.1\..*-arm64$/.test(f))
    : undefined;
  const version = image?.replace(/^vmlinuz-/, "");
  if (!image || !version || !existsSync(join(root, "lib/modules", version, "modules.dep")))
    return `no arm64 kernel in ${root} (sh test/kernel/fetch-kernels.sh arm64)`;
  const busybox = join(root, "bin/busybox");
  if (!existsSync(busybox)) return `no arm64 busybox in ${root} (sh test/kernel/fetch-kernels.sh arm64)`;
  return { series: "6.1", arch: "arm64", busybox, version, vmlinuz: join(boot, image), root };
}

/** Why the harness cannot run here, or null when it can. */
export function vmUnavailable(arch: GuestArch = "amd64"): string | null {
  if (process.getuid?.() !== 0) return "not root (9p export of / and BPF in the guest need root)";
  const { qemu, debianPackage } = GUEST_ARCHES[arch];
  if (spawnSync(qemu, ["--version"], { encoding: "utf8" }).status !== 0)
    return `${qemu} is not installed (apt-get install ${debianPackage})`;
  if (!existsSync("/bin/busybox")) return "busybox-static is not installed";
  return null;
}

const BOOT_MODULES = ["virtio_pci", "9pnet_virtio", "9p", "overlay"];

/** Dependency-ordered module files for `names` (built-in ones are skipped). */
function moduleClosure(modulesDir: string, names: string[]): string[] {
  const deps = new Map<string, string[]>();
  for (const line of readFileSync(join(modulesDir, "modules.dep"), "utf8").split("\n")) {
    const [mod, rest] = line.split(":");
    if (mod) deps.set(mod, (rest ?? "").trim().split(/\s+/).filter(Boolean));
  }
  const byName = new Map<string, string>();
  for (const mod of deps.keys())
    byName.set(
      mod
        .replace(/^.*\//, "")
        .replace(/\.ko(\.\w+)?$/, "")
        .replace(/-/g, "_"),
      mod,
    );
  const order: string[] = [];
  const visit = (mod: string) => {
    if (order.includes(mod)) return;
    for (const dep of deps.get(mod) ?? []) visit(dep);
    order.push(mod);
  };
  for (const name of names) {
    const mod = byName.get(name);
    if (mod) visit(mod);
  }
  return order;
}

const INIT = `#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /modules.order); do insmod /modules/$m || echo "hive-vm: insmod $m failed"; done
mkdir -p /lower /rw /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hiveroot /lower || { echo "hive-vm: 9p mount failed"; poweroff -f; }
mount -t tmpfs -o size=75% tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot || { echo "hive-vm: overlay failed"; poweroff -f; }
# A root without busybox (an image's tree) gets this one, for stage 2.
[ -e /newroot/bin/busybox ] || cp /bin/busybox /newroot/bin/busybox
cp /stage2.sh /newroot/hive-stage2.sh
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/busybox sh /hive-stage2.sh
`;

const STAGE2 = `export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
bb=/bin/busybox
$bb mount -t proc proc /proc
$bb mount -t sysfs sysfs /sys
$bb mount -t bpf bpf /sys/fs/bpf
$bb mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
$bb mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
$bb mount -t cgroup2 cgroup2 /sys/fs/cgroup
$bb mount -t securityfs securityfs /sys/kernel/security 2>/dev/null
$bb mount -t tmpfs tmpfs /run
# The guest gets a fresh /tmp (overlays in tests need a tmpfs upper layer); the host's /tmp
# stays reachable here, for a repository checked out under it.
$bb mkdir -p /run/hive-host-tmp
$bb mount --bind /tmp /run/hive-host-tmp
$bb mount -t tmpfs tmpfs /tmp
$bb mkdir -p /dev/pts /dev/shm /hive-out
$bb mount -t devpts devpts /dev/pts
# The links udev makes on a real system (devtmpfs has none). /dev/fd is needed by runc and
# crun: they re-exec themselves with execveat(fd, "", AT_EMPTY_PATH), for which the kernel
# names the program "/dev/fd/N", and TOMOYO (an active LSM in Debian's kernels) resolves that
# name on every exec; kernels without the fallback to the file's real path (Debian's 5.10.223)
# then fail the exec with ENOENT.
$bb ln -sfn /proc/self/fd /dev/fd
$bb ln -sfn /proc/self/fd/0 /dev/stdin
$bb ln -sfn /proc/self/fd/1 /dev/stdout
$bb ln -sfn /proc/self/fd/2 /dev/stderr
$bb mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 hiveout /hive-out
$bb hostname hive-vm
. /hive-out/run.sh > /hive-out/output.log 2>&1
echo $? > /hive-out/exit-code
$bb sync
echo o > /proc/sysrq-trigger
$bb poweroff -f
`;

/** Builds (or reuses) the initramfs for one kernel. */
export function buildInitramfs(kernel: KernelImage): string {
  const out = join(WORK_DIR, `initramfs-${kernel.version}.cpio.gz`);
  const busybox = kernel.busybox ?? "/bin/busybox";
  const self = fileURLToPath(import.meta.url);
  if (existsSync(out) && statSync(out).mtimeMs > statSync(self).mtimeMs) return out;
  const modulesDir = join(kernel.root, "lib/modules", kernel.version);
  // Per process: the kernel suite and the image suite may build the same kernel's at once.
  const staging = join(WORK_DIR, `initramfs-${kernel.version}.${process.pid}`);
  rmSync(staging, { recursive: true, force: true });
  for (const dir of ["bin", "dev", "proc", "sys", "modules"])
    mkdirSync(join(staging, dir), { recursive: true });
  const order: string[] = [];
  for (const mod of moduleClosure(modulesDir, BOOT_MODULES)) {
    const base = mod.replace(/^.*\//, "");
    const target = join(staging, "modules", base.replace(/\.ko\.\w+$/, ".ko"));
    const source = join(modulesDir, mod);
    if (base.endsWith(".ko.xz")) spawnSyncChecked("sh", ["-c", `xz -dc '${source}' > '${target}'`]);
    else if (base.endsWith(".ko.zst")) spawnSyncChecked("sh", ["-c", `zstd -qdc '${source}' > '${target}'`]);
    else spawnSyncChecked("cp", [source, target]);
    order.push(base.replace(/\.ko\.\w+$/, ".ko"));
  }
  writeFileSync(join(staging, "modules.order"), `${order.join("\n")}\n`);
  spawnSyncChecked("cp", [busybox, join(staging, "bin/busybox")]);
  writeFileSync(join(staging, "init"), INIT, { mode: 0o755 });
  writeFileSync(join(staging, "stage2.sh"), STAGE2, { mode: 0o755 });
  spawnSyncChecked("sh", [
    "-c",
    `cd '${staging}' && find . | cpio -o -H newc --quiet | gzip -1 > '${out}.${process.pid}' && mv '${out}.${process.pid}' '${out}'`,
  ]);
  rmSync(staging, { recursive: true, force: true });
  return out;
}

function spawnSyncChecked(cmd: string, args: string[]): void {
  const result = spawnSync(cmd, args, { encoding: "utf8" });
  if (result.status !== 0) {
    throw new HiveError("QemuUnavailable", `${cmd} failed while building the initramfs: ${result.stderr}`, {
      object: args.join(" "),
    });
  }
}

export interface BootOptions {
  kernel: KernelImage;
  /**
   * The tree shared read-only as the guest's root (default "/", the host's; an arm64 kernel
   * needs an arm64 tree). Another tree holds neither the repository nor the kernel's modules:
   * the command runs from its root directory.
   */
  rootfs?: string;
  /** Shell command run inside the guest (as root, cwd = repository root). */
  command: string;
  env?: Record<string, string>;
  timeoutMs?: number;
  memoryMb?: number;
  /** QEMU -icount shift=0: guest clock = instructions (deterministic cost measurements). */
  icount?: boolean;
  /** Called with console output as it arrives (boot progress). */
  onConsole?: (text: string) => void;
  /**
   * More QEMU arguments, e.g. a user-mode network restricted to forwarded loopback ports
   * (`-netdev user,restrict=on,guestfwd=…`); by default the guest has no network device.
   */
  qemuArgs?: string[];
  /** The directory shared as /hive-out (default: a fresh one under WORK_DIR), known before boot. */
  outDir?: string;
}

export interface BootResult {
  /** What the command printed (stdout + stderr). */
  output: string;
  /** The command's exit code, or null when the guest never finished it. */
  exitCode: number | null;
  /** The guest's serial console (kernel messages, init errors). */
  console: string;
  /** Directory shared with the guest as /hive-out; the command may leave files there. */
  outDir: string;
  durationMs: number;
}

let bootCounter = 0;

export async function bootVm(options: BootOptions): Promise<BootResult> {
  const { kernel } = options;
  const arch = GUEST_ARCHES[kernel.arch ?? "amd64"];
  const rootfs = options.rootfs ?? "/";
  const hostRoot = rootfs === "/";
  const initramfs = buildInitramfs(kernel);
  const suffix = kernel.arch && kernel.arch !== "amd64" ? `-${kernel.arch}` : "";
  const outDir =
    options.outDir ?? join(WORK_DIR, `run-${process.pid}-${++bootCounter}-${kernel.series}${suffix}`);
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const env = { HOME: "/root", HIVE_VM_KERNEL: kernel.series, ...options.env };
  const modulesLink =
    kernel.root === "/" || !hostRoot
      ? ""
      : `mkdir -p /lib/modules && ln -sfn '${join(kernel.root, "lib/modules", kernel.version)}' '/lib/modules/${kernel.version}'\n`;
  const exports = Object.entries(env)
    .map(([k, v]) => `export ${k}='${v.replace(/'/g, `'\\''`)}'`)
    .join("\n");
  const repoUnderTmp =
    hostRoot && REPO_ROOT.startsWith("/tmp/")
      ? `mkdir -p '${REPO_ROOT}' && mount --bind '/run/hive-host-tmp/${REPO_ROOT.slice("/tmp/".length)}' '${REPO_ROOT}'\n`
      : "";
  writeFileSync(
    join(outDir, "run.sh"),
    `${modulesLink}${repoUnderTmp}${exports}\ncd '${hostRoot ? REPO_ROOT : "/"}'\n${options.command}\n`,
  );

  const args = [
    ...arch.machine,
    "-smp",
    "1",
    "-m",
    String(options.memoryMb ?? 2048),
    ...(options.icount ? ["-icount", "shift=0"] : []),
    "-nographic",
    "-no-reboot",
    "-kernel",
    kernel.vmlinuz,
    "-initrd",
    initramfs,
    "-append",
    `console=${arch.console} quiet panic=-1 rdinit=/init`,
    "-virtfs",
    `local,path=${rootfs},mount_tag=hiveroot,security_model=passthrough,readonly=on,multidevs=remap`,
    "-virtfs",
    `local,path=${outDir},mount_tag=hiveout,security_model=passthrough`,
    ...(options.qemuArgs ?? []),
  ];
  const started = Date.now();
  const child = spawn(arch.qemu, args, { stdio: ["ignore", "pipe", "pipe"] });
  let consoleText = "";
  const collect = (chunk: Buffer) => {
    const text = chunk.toString("utf8");
    consoleText += text;
    options.onConsole?.(text);
  };
  child.stdout.on("data", collect);
  child.stderr.on("data", collect);
  const timeoutMs = options.timeoutMs ?? 300_000;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill("SIGKILL");
  }, timeoutMs);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on("error", (error) =>
      reject(
        new HiveError("QemuUnavailable", `cannot start qemu: ${error.message}`, {
          object: kernel.vmlinuz,
          cause: error,
        }),
      ),
    );
    child.on("exit", (status) => resolve(status));
  });
  clearTimeout(timer);
  const read = (name: string) =>
    existsSync(join(outDir, name)) ? readFileSync(join(outDir, name), "utf8") : "";
  const exitText = read("exit-code").trim();
  if (timedOut && !exitText) {
    throw new HiveError(
      "QemuUnavailable",
      `the ${kernel.series} guest did not finish within ${timeoutMs} ms`,
      {
        object: kernel.vmlinuz,
        hint: `console tail:\n${consoleText.slice(-3000)}\noutput tail:\n${read("output.log").slice(-3000)}`,
      },
    );
  }
  if (code !== 0 && !exitText) {
    throw new HiveError(
      "QemuUnavailable",
      `the ${kernel.series} guest stopped before running the command (qemu exit ${code})`,
      {
        object: kernel.vmlinuz,
        hint: `console tail:\n${consoleText.slice(-3000)}`,
      },
    );
  }
  return {
    output: read("output.log"),
    exitCode: exitText === "" ? null : Number(exitText),
    console: consoleText,
    outDir,
    durationMs: Date.now() - started,
  };
}
