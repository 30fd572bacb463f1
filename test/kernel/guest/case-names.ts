/** The kernel cases, in run order: the guest runs them, the host suite lists one test each. */
export const KERNEL_CASES = [
  "a read of a watched file gives exactly one event with the reader's pid, tgid, uid, gid, comm and mask",
  "a write gives a write event",
  "an append gives an append event",
  "an exec gives an exec event",
  "an open for writing is reported when only writes are wanted, and reads are dropped in the kernel",
  "an unwatched file gives no event",
  "repeated checks by one thread collapse into one event with a count",
  "a file reached through a symlink, a hard link and a bind mount is reported",
  "of two files with the same inode number on two filesystems only the watched one reports",
  "a file inside a separate mount namespace and chroot, keyed through /proc/PID/root, is reported",
  "a file inside a real container (containerd + runc) is reported with the container's cgroup id and the executable as the container sees it",
  "an event names the executable the kernel resolved, its parent and ancestors, for a process that exits at once",
  "a process that renamed itself is named by its executable; comm is what it set",
  "a binary run through a symlink or a relative path is named by the file executed",
  "a process that predates the program is named from the seed, and marked as seeded",
  "allow: an allowed executable raises no alert and is counted; a copy under the allowed name elsewhere or another binary alerts",
  "allow: a child of an allowed parent raises no alert; the same child under another parent alerts",
  "a decoy reading the trap in a loop does not hide a single read by another executable",
  "a flood from one cgroup is summarised in the kernel: a single read of another trap, from another cgroup and from the flooding cgroup by another executable, is delivered, and the allowed flooding program run with LD_PRELOAD is alerted at each read",
  "allow in a container: the kernel lets the image's sshd, head and a child of the image's cron through without an event, sshd in a tight loop too; a binary written over sshd, sshd in a chroot, LD_PRELOAD, a parent that exec'd cron, an orphan adopted by cron and sshd whose memory another process wrote alert, each with its reason",
  "allow in a container: an executable run from a memfd or from a deleted file alerts, its provenance shown",
  "deny in a container: the image's sshd and head, its allow list, read; the trapped file is refused (EACCES) and alerted denied, by cat, by head under LD_PRELOAD, by sshd whose memory another process wrote, through a hard link in a chroot and by a binary written over sshd; a dry run reads and is alerted would-deny; another container of the image reads freely; the deny and its allow list hold while its agent is SIGKILLed and lift when the trap is gone",
  "standalone follows containers without SIGHUP: each container started later is armed from containerd's event stream and its read alerted with its name; a stopped one's entries leave the kernel map",
  "entry changes in a watched file's directory are reported as control events",
  "changes of a trapped file are alerted with the change named, and the trap follows the file: two renames over it 100 ms apart, sed -i, a truncate, a read and a delete",
  "a trap on a projected volume's file (the kubelet's atomic writer swaps ..data) stays armed: a read after each of three updates is alerted",
  "removing an entry from the map stops its events",
  "a trap is proven when armed: a file on an overlay is watched by the identity the kernel checks, and proving never alerts",
  "in a root that is an overlay of layers on two filesystems, the agent's resolver threads arm lower and upper files as the kernel checks them",
  "an image layer's file written through a container's overlay, before the container's own copy is armed, is judged as a write: a write-only trap fires on the append, not on a read; an overwrite is a write; a refused write just before an exec does not hide the exec",
  "10,000 watched files: each read reports its own slot",
  "100,000 accesses: every burst is delivered, held as a flood's count, or counted as lost",
  "a full burst table loses nothing: the accesses it cannot hold are reported at once and counted",
  "a failed ring drain is replaced: not ready meanwhile, and events flow again",
  "a backlog is read in batches between which the event loop turns: acknowledgements, the spool and timers run while it is read",
  "records that wrap past the end of a small ring buffer are read whole, lap after lap",
  "a cgroup 13 levels below a container's, one made fresh per access, is named its container's by id, without walking the cgroup tree",
  "when process tracking cannot attach, files are still watched and alerts say the executable is unknown",
  "pinned maps survive an agent restart and are adopted; a clean shutdown removes them",
  "after adopting an earlier agent's backlog, flush() waits for the new agent's own accesses",
  "events are consumed only once handled: an agent killed before, or stopped while holding them, leaves them to the next",
  "while acknowledgements are held, the ring drain sleeps instead of spinning a core",
  "a trapped file replaced while no agent runs is reported to the next one: the directory hooks stay attached",
  "a spool whose disk is full keeps its alerts' events in the ring: a killed agent leaves them to the next, which delivers each access once",
  "an upgrade to another build replaces the running program without a gap: every access across it is delivered, and the new build runs",
  "an upgrade to another map layout counts what the earlier version left unread, and watches with fresh maps",
  "every attach mode the kernel offers reports reads, and auto picks the least-privileged one",
  "a trap on an image's file holds from each container's first instruction, for the agent and hive watch alike: 20 containers and an init container that read it at once alert, each named; a container no trap selects does not, and is then quieted in the kernel; a resolved container's read alerts once",
] as const;

export type KernelCaseName = (typeof KERNEL_CASES)[number];

/** Cases not run on some kernels, and why (the host suite does not list them there). */
export const CASE_EXCLUSIONS: Partial<Record<KernelCaseName, { kernels: string[]; reason: string }>> = {
  // User space's fallback when the process hooks cannot attach (it closes them and goes on): the
  // same on every kernel; 6.12 runs it (8 to 12 s of guest time each elsewhere).
  "when process tracking cannot attach, files are still watched and alerts say the executable is unknown": {
    kernels: ["5.10", "6.1"],
    reason: "user space's fallback, the same on every kernel: run on 6.12",
  },
  // The burst folding a decoy relies on is the program's own code, the same on every kernel: one
  // fentry kernel (6.1) and kprobe.multi (6.12) run it (19 s of guest time on 5.10).
  "a decoy reading the trap in a loop does not hide a single read by another executable": {
    kernels: ["5.10"],
    reason:
      "the program's burst folding, the same on every kernel: run on 6.1 (fentry) and 6.12 (kprobe.multi)",
  },
  // Debian's 5.10 and 6.1 both attach by fentry (6.12 by kprobe.multi): the pins, links and
  // program replacement these exercise are the same calls in the same mode on both, so each runs
  // on one of the two (70 s, 26 s and 17 s of guest time saved), and 5.10 keeps the parent hook's.
  "an upgrade to another build replaces the running program without a gap: every access across it is delivered, and the new build runs":
    {
      kernels: ["5.10"],
      reason: "the same fentry links and pins as on 6.1, where it runs (and on 6.12 by kprobe.multi)",
    },
  "pinned maps survive an agent restart and are adopted; a clean shutdown removes them": {
    kernels: ["5.10"],
    reason: "the same fentry link and map pins as on 6.1, where it runs (and on 6.12 by kprobe.multi)",
  },
  "a trapped file replaced while no agent runs is reported to the next one: the directory hooks stay attached":
    {
      kernels: ["6.1"],
      reason:
        "the same fentry change hooks as on 5.10, which also has the split inode_permission's parent hook (and on 6.12 by kprobe.multi)",
    },
  // The ring buffer's consumer position, pinned with the map, is the same protocol on every kernel
  // since 5.8 (the spool case below says the same); 25 to 45 s of guest time each.
  "events are consumed only once handled: an agent killed before, or stopped while holding them, leaves them to the next":
    {
      kernels: ["5.10", "6.1"],
      reason: "user-space logic over the same ring-buffer protocol on every kernel: run on 6.12",
    },
  // User-space logic (the spool's gate on the ring consumer) over the ring buffer's mmap protocol,
  // which is the same on every kernel; a minute of guest time each, so run where CI has it cheapest.
  "a spool whose disk is full keeps its alerts' events in the ring: a killed agent leaves them to the next, which delivers each access once":
    {
      kernels: ["5.10", "6.1"],
      reason: "user-space logic over the same ring-buffer protocol on every kernel: run on 6.12",
    },
  // The README end-to-end (test/e2e) runs a container's first instruction on 6.12 with a real
  // kubelet and containerd 2, the agent image and a one-shot Job: this case stays on 6.1 (about
  // 4.5 min of guest time on 6.12, 2.5 on 5.10). HIVE_ALL_CASES=1 runs it everywhere.
  "a trap on an image's file holds from each container's first instruction, for the agent and hive watch alike: 20 containers and an init container that read it at once alert, each named; a container no trap selects does not, and is then quieted in the kernel; a resolved container's read alerts once":
    {
      kernels: ["6.12", "5.10"],
      reason:
        "the README end-to-end covers a container's first instruction on 6.12 on a real node; 5.10 reads the cgroup's kernfs names as 6.1 does, and its overlay hooks are proven by the allow cases",
    },
  // The ring drain's own logic (the consumer position, its sleep while held, its replacement)
  // over the ring buffer's mmap protocol, the same on every kernel since 5.8.
  "after adopting an earlier agent's backlog, flush() waits for the new agent's own accesses": {
    kernels: ["5.10", "6.1"],
    reason: "user-space logic over the same ring-buffer protocol on every kernel: run on 6.12",
  },
  "while acknowledgements are held, the ring drain sleeps instead of spinning a core": {
    kernels: ["5.10", "6.1"],
    reason: "user-space logic over the same ring-buffer protocol on every kernel: run on 6.12",
  },
  "a failed ring drain is replaced: not ready meanwhile, and events flow again": {
    kernels: ["5.10", "6.1"],
    reason: "user-space logic over the same ring-buffer protocol on every kernel: run on 6.12",
  },
  "a backlog is read in batches between which the event loop turns: acknowledgements, the spool and timers run while it is read":
    {
      kernels: ["5.10", "6.1"],
      reason: "user-space logic over the same ring-buffer protocol on every kernel: run on 6.12",
    },
  "records that wrap past the end of a small ring buffer are read whole, lap after lap": {
    kernels: ["5.10", "6.1"],
    reason: "user-space logic over the same ring-buffer protocol on every kernel: run on 6.12",
  },
  // The layout check of pinned maps and the drain of the earlier ring are user space; the map and
  // link calls under them are those of the build upgrade, which runs on every kernel.
  "an upgrade to another map layout counts what the earlier version left unread, and watches with fresh maps":
    {
      kernels: ["5.10", "6.1"],
      reason: "user-space logic over the link and map calls the build upgrade proves on every kernel",
    },
  // Capacity and load: the same maps (sizes, NOEXIST inserts into the burst table) and the same
  // ring-buffer protocol on every kernel since 5.8, driven by the agent's own arming and reading;
  // that the program and its flood summary hold on each kernel is what the cases before them
  // prove there (the flood, the decoy). 15 to 25 s of guest time each.
  "10,000 watched files: each read reports its own slot": {
    kernels: ["5.10", "6.1"],
    reason: "the same hash map and user-space arming on every kernel: run on 6.12",
  },
  "100,000 accesses: every burst is delivered, held as a flood's count, or counted as lost": {
    kernels: ["5.10", "6.1"],
    reason: "the same ring-buffer protocol and burst table on every kernel: run on 6.12",
  },
  "a full burst table loses nothing: the accesses it cannot hold are reported at once and counted": {
    kernels: ["5.10", "6.1"],
    reason: "the same burst table (a full hash map refuses the insert) on every kernel: run on 6.12",
  },
  // The README end-to-end reads a trapped file in a container a real kubelet started under
  // containerd 2 on 6.12, and checks the container id and executable its alert names.
  "a file inside a real container (containerd + runc) is reported with the container's cgroup id and the executable as the container sees it":
    {
      kernels: ["6.12"],
      reason: "the README end-to-end reads the trapped file in a kubelet's container on 6.12",
    },
  // User-space logic (containerd's event stream, re-plans) over overlay traps the allow cases
  // already prove on every kernel.
  "standalone follows containers without SIGHUP: each container started later is armed from containerd's event stream and its read alerted with its name; a stopped one's entries leave the kernel map":
    {
      kernels: ["5.10", "6.1"],
      reason: "user-space logic over container traps proven on every kernel: run on 6.12",
    },
};

/** Whether `name` is not run on kernel `series` (CASE_EXCLUSIONS), unless HIVE_ALL_CASES is set. */
export function excludedOn(name: KernelCaseName, series: string): boolean {
  return !process.env.HIVE_ALL_CASES && (CASE_EXCLUSIONS[name]?.kernels.includes(series) ?? false);
}

/**
 * The cases that talk to a Kubernetes API server: the host suite starts a real one for the guest
 * (test/cluster/guest-api.ts) when one of them runs, and checks its audit log after.
 */
export const API_SERVER_CASES: readonly KernelCaseName[] = [
  "a trap on an image's file holds from each container's first instruction, for the agent and hive watch alike: 20 containers and an init container that read it at once alert, each named; a container no trap selects does not, and is then quieted in the kernel; a resolved container's read alerts once",
];

export interface KernelCaseResult {
  name: string;
  ok: boolean;
  error?: string;
  durationMs: number;
  details?: Record<string, unknown>;
}
