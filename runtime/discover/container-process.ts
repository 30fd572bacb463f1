/**
 * A container's process held by its /proc directory, so that a PID reused between the
 * runtime's answer and our use of it can never send the agent (root on the host) to a host
 * process's root. The runtime names a PID; the container may exit and the PID go to a host
 * process before we open `/proc/<pid>/root`. Resolving a trap there would stat — and with
 * `create: true` create — a host file.
 *
 * So `/proc/<pid>` is opened once (O_PATH|O_DIRECTORY). That descriptor is bound to one
 * process, not to the number: once the process is gone, lookups through it fail (ENOENT/ESRCH)
 * even if the PID now names another process. The identity (its cgroup, which must name the
 * expected container) and the root are both read through the descriptor
 * (`/proc/self/fd/<fd>/cgroup`, `/proc/self/fd/<fd>/root`), and the identity is checked before
 * and after the root is opened. Node has no pidfd_open(2) or openat(2); the descriptor plus the
 * /proc/self/fd magic link gives the same guarantee.
 */
import { closeSync, constants, openSync, readFileSync } from "node:fs";
import { HiveError } from "../../api/errors.ts";
import { containerCgroupMatcher } from "./container-runtime.ts";

/** O_PATH is not in Node's constants; the value is the same on x86-64 and arm64 (asm-generic). */
const O_PATH = 0o10000000;

export interface ContainerProcess {
  readonly pid: number;
  /** Throws ContainerNotFound unless the held process is alive and in the container's cgroup. */
  verify(): void;
  /** The process's root directory (O_PATH fd), opened through the held descriptor and verified; the caller closes it. */
  openRoot(): number;
  close(): void;
}

const gone = (containerId: string, pid: number, why: string, cause?: unknown) =>
  new HiveError("ContainerNotFound", `process ${pid} is not the container's any more (${why})`, {
    object: containerId,
    hint: "the container exited or restarted and its PID may belong to another process now; it is looked up again",
    ...(cause === undefined ? {} : { cause }),
  });

/**
 * Opens `<procRoot>/<pid>` and checks the process is in the cgroup of `containerId` (bare id).
 * Throws ContainerNotFound when the process is gone or is not the container's (PID reused).
 */
export function openContainerProcess(procRoot: string, pid: number, containerId: string): ContainerProcess {
  if (!Number.isInteger(pid) || pid <= 0) throw gone(containerId, pid, "not a process id");
  const inContainer = containerCgroupMatcher(containerId);
  let fd: number | undefined;
  try {
    fd = openSync(`${procRoot}/${pid}`, O_PATH | constants.O_DIRECTORY);
  } catch (error) {
    throw gone(containerId, pid, "the process has exited", error);
  }
  const held = `/proc/self/fd/${fd}`;
  const verify = () => {
    if (fd === undefined) throw gone(containerId, pid, "closed");
    let cgroup: string;
    try {
      cgroup = readFileSync(`${held}/cgroup`, "utf8");
    } catch (error) {
      throw gone(containerId, pid, "the process has exited", error);
    }
    if (!inContainer(cgroup)) throw gone(containerId, pid, "its cgroup does not name the container");
  };
  const close = () => {
    if (fd === undefined) return;
    closeSync(fd);
    fd = undefined;
  };
  try {
    verify();
  } catch (error) {
    close();
    throw error;
  }
  return {
    pid,
    verify,
    openRoot() {
      verify();
      let root: number;
      try {
        // The root magic link of the held process, never of whatever the PID names now.
        root = openSync(`${held}/root`, O_PATH | constants.O_DIRECTORY);
      } catch (error) {
        throw gone(containerId, pid, "its root is not reachable", error);
      }
      try {
        verify(); // still the container's process after the open: the root is the container's
      } catch (error) {
        closeSync(root);
        throw error;
      }
      return root;
    },
    close,
  };
}
