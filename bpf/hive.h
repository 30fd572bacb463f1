/* Structs shared by the BPF program (hive.bpf.c) and user space.
 * Layout shared with runtime/kernel/layout.ts; test/kernel/layout.test.ts compares both
 * against the compiled object's BTF. Fixed-width fields and explicit padding only: hidden
 * padding in a hash key breaks lookups, and hidden padding in the event breaks decoding. */
#ifndef HIVE_H
#define HIVE_H

/* MAY_* bits of inode_permission's mask (include/linux/fs.h). */
#define HIVE_MAY_EXEC 0x01
#define HIVE_MAY_WRITE 0x02
#define HIVE_MAY_READ 0x04
#define HIVE_MAY_APPEND 0x08
#define HIVE_MAY_ACCESS 0x10
#define HIVE_MAY_OPEN 0x20

/* Changes of a trapped file, from the unlink, rename and truncate hooks: carried above the
 * MAY_* bits, in hive_value.mask (wanted) and hive_event.mask (seen). A change joins its
 * thread's pending burst of the same file (open(O_TRUNC): one event, write + truncated) and is
 * never held by flood summaries. */
#define HIVE_CHANGE_DELETED 0x10000   /* its name unlinked */
#define HIVE_CHANGE_RENAMED 0x20000   /* renamed away (or exchanged) */
#define HIVE_CHANGE_REPLACED 0x40000  /* another file renamed over it */
#define HIVE_CHANGE_TRUNCATED 0x80000 /* its size set (truncate, ftruncate, open with O_TRUNC) */
#define HIVE_CHANGES 0xf0000

/* A denying trap's outcome (hive.bpf.c hive_deny), in hive_event.mask above the change bits: the
 * kernel refused the access (EACCES), or a dry run would have. */
#define HIVE_DENIED 0x100000
#define HIVE_DENY_DRY_RUN 0x200000

/* hive_value.action: what the kernel does besides reporting (HivePolicy trap `action`, `dryRun`). */
#define HIVE_ACTION_ALERT 0
#define HIVE_ACTION_DENY 1
#define HIVE_ACTION_DRY_RUN 2

/* Watch entry kinds: a trapped file, or the directory holding one (entry changes there
 * are control events telling user space to re-resolve the path). */
#define HIVE_KIND_FILE 0
#define HIVE_KIND_PARENT 1
/* A file the kernel armed itself: renamed over a trapped file, it took the trapped name, and the
 * rename hook copied the trap's entry to it (slot and mask) so that no access goes unseen until
 * user space re-resolves the path. Listed in hive_followed until user space has reconciled it. */
#define HIVE_KIND_FOLLOWED 2

/* Pre-filter bitmap: one bit per (i_ino & HIVE_BITMAP_MASK), stored as u64 words in an
 * array map (whose lookups the verifier inlines). */
#define HIVE_BITMAP_WORDS 1024
#define HIVE_BITMAP_MASK (HIVE_BITMAP_WORDS * 64 - 1)

/* Process identity (process.bpf.h): executables are kept as paths of at most HIVE_EXE_MAX
 * bytes (with the NUL), resolved by walking at most HIVE_PATH_DEPTH components. */
#define HIVE_EXE_MAX 256
/* A cgroup directory's name: a systemd scope `cri-containerd-<64 hex>.scope` is 85 bytes. */
#define HIVE_CGROUP_NAME_MAX 96
#define HIVE_PATH_DEPTH 40
/* hive_proc.flags / hive_event.exe_flags: where the executable came from (low byte) ... */
#define HIVE_EXE_UNKNOWN 0
#define HIVE_EXE_EXEC 1 /* recorded at exec, or inherited at fork from a recorded parent */
#define HIVE_EXE_SEED 2 /* the process predates the program; read from its task at load */
#define HIVE_EXE_SOURCE_MASK 0xff
/* ... and what is wrong with the path. */
#define HIVE_EXE_TRUNCATED 0x100 /* longer than HIVE_EXE_MAX or deeper than HIVE_PATH_DEPTH */
#define HIVE_EXE_UNREACHABLE 0x200 /* not under the process's root (the path starts at its mount's root) */
/* ... which file ran: where the executable's inode lives (none of the three: a filesystem
 * other than an overlay, such as a volume or the host's) ... */
#define HIVE_EXE_IMAGE 0x1000    /* an overlay's file with no upper copy: an image layer's, unchanged */
#define HIVE_EXE_WRITTEN 0x2000  /* an overlay's file in its upper layer: written or changed in the container */
#define HIVE_EXE_UNLINKED 0x4000 /* a file with no name left: a memfd, or deleted since */
/* ... what the environment asked the dynamic loader at exec ... */
#define HIVE_EXE_LD_PRELOAD 0x10000
#define HIVE_EXE_LD_AUDIT 0x20000
#define HIVE_EXE_LD_LIBRARY_PATH 0x40000
#define HIVE_EXE_ENV_UNREAD 0x80000 /* the environment was not read whole: nothing is known of it */
/* ... and what happened to the process since. Inherited at fork: a child shares what was loaded. */
#define HIVE_EXE_TRACED 0x100000      /* traced (ptrace), or its memory opened to another process, at exec or since */
#define HIVE_EXE_FORK_UNSEEN 0x200000 /* its fork predates the program: who spawned it is unknown */

/* hive_event.relation: the accessing process and its parent at the access. */
#define HIVE_REL_CHROOT 0x1          /* the process's root is a directory inside a mount, not a mount's root */
#define HIVE_REL_PARENT_CHROOT 0x2   /* likewise for the parent */
#define HIVE_REL_PARENT_EXECED 0x4   /* the parent ran another executable since it forked the process */
#define HIVE_REL_REPARENTED 0x8      /* the parent is not the process that forked it (orphaned, adopted) */

/* A file as the kernel identifies it: the superblock's s_dev (kernel encoding,
 * major << 20 | minor) and the inode number. */
struct hive_key {
	__u64 ino;
	__u32 dev;
	__u32 _pad;
};

struct hive_value {
	__u32 slot;  /* chosen by user space, echoed in every event */
	__u32 mask;  /* wanted HIVE_MAY_* bits; other checks are dropped in the kernel */
	__u32 kind;  /* HIVE_KIND_* */
	/* Non-zero: checks of entries with the same group continue one burst. An image layer's file
	 * and a container's overlay inode over it are checked one after the other by one access.
	 * The contract: an image layer's own entry has group == slot (the group is named after it);
	 * an overlay entry over it has the layer's slot as group, never its own. Only the layer's
	 * entry is reached by every container of the image, so only it is looked up in hive_quiet. */
	__u32 group;
	/* HIVE_ACTION_*: only a container's own file (kind FILE or FOLLOWED, group != slot) denies; an
	 * image layer's file is every container's of the image, selected or not. */
	__u32 action;
	__u32 flags; /* HIVE_WATCH_*: what else the kernel decides for this entry */
};

/* hive_value.flags: the trap has allow entries the kernel decides (hive_allow holds keys of this
 * slot), and some of them name a `parent-exe` (the parent's key is looked up too). */
#define HIVE_WATCH_ALLOW 0x1
#define HIVE_WATCH_ALLOW_PARENT 0x2

/* The allow decision in the kernel (hive.bpf.c hive_allowed). The first HIVE_ALLOW_ENTRIES entries
 * of a trap's allow list that name exact paths are decided here; later or `*` entries are decided
 * by user space, which still receives the access. */
#define HIVE_ALLOW_ENTRIES 32
/* hive_allow.kinds[i] of an entry without `accesses`: every kind, and changes too. */
#define HIVE_ALLOW_ANY 0xffffffff
/* The MAY_* bits that are access kinds (read, write, exec, append, open; MAY_ACCESS is none). */
#define HIVE_ALLOW_KINDS (HIVE_MAY_EXEC | HIVE_MAY_WRITE | HIVE_MAY_READ | HIVE_MAY_APPEND | HIVE_MAY_OPEN)

/* hive_allow's key: an executable file (as hive_proc records it at exec) that allow entries of the
 * trap behind watch slot `slot` name, as discover found it at the entry's exact path in the
 * accessing container (the device is that container's overlay: the key is one container's). */
struct hive_allow_key {
	__u64 ino;
	__u32 dev;
	__u32 slot;
};

/* One trap's allow list as the kernel decides it, and what it let through with this key. */
struct hive_allow {
	__u32 exe;          /* bit i: entry i's `exe` is this file */
	__u32 parent;       /* bit i: entry i's `parent-exe` is this file */
	__u32 needs_exe;    /* bit i: entry i has an `exe` (the same in every key of the slot) */
	__u32 needs_parent; /* bit i: entry i has a `parent-exe` */
	__u32 decided;      /* bit i: entry i is decided here (exact paths only) */
	__u32 host;         /* a host path's trap: the host's own files count, the root is not checked */
	__u32 kinds[HIVE_ALLOW_ENTRIES];   /* entry i's `accesses` as MAY_* bits; HIVE_ALLOW_ANY without */
	__u64 allowed[HIVE_ALLOW_ENTRIES]; /* checks entry i allowed through this key (kernel-written) */
};

/* hive_quiet's key: a cgroup (container) whose accesses to an image layer's group alert nobody.
 * User space writes it when it drops such an access as unselected and clears the whole map
 * whenever what selects could have changed; the kernel then skips that cgroup's checks of the
 * layer's entry (no burst, no event), counting them in hive_counters.quiet. */
struct hive_quiet_key {
	__u64 cgroup_id;
	__u32 group;
	__u32 _pad;
};

/* A process (thread group), keyed by tgid in hive_procs. */
struct hive_proc {
	__u64 start_ns;        /* task start_time (CLOCK_MONOTONIC): with the tgid, the process's identity */
	__u64 exec_ns;         /* when it began running exe: the exec, the fork that inherited it, or start */
	__u64 parent_start_ns; /* the forking parent's start_ns: tells it from a reused pid or a new parent */
	__u64 parent_exec_ns;  /* the forking parent's exec_ns at the fork: it vouches only while unchanged */
	__u64 exe_ino;         /* the executable's inode, as the kernel checks it (an overlay's own) */
	__u32 exe_dev;         /* ... and its superblock's s_dev */
	__u32 ppid;            /* the forking parent's tgid (kept through exec) */
	__u32 ns_pid;          /* tgid inside the process's own pid namespace */
	__u32 uid;             /* real uid at exec */
	__u32 flags;           /* HIVE_EXE_* */
	__u32 _pad;
	char exe[HIVE_EXE_MAX];
};

/* One access burst (consecutive checks of one file by one thread). */
struct hive_event {
	__u64 ktime_ns;  /* first check of the burst, bpf_ktime_get_ns (CLOCK_MONOTONIC) */
	__u64 last_ns;   /* last check of the burst */
	__u64 ino;
	__u64 cgroup_id;
	__u32 dev;
	__u32 mask;  /* union of the burst's masks */
	__u32 pid;   /* thread id */
	__u32 tgid;  /* process id */
	__u32 uid;
	__u32 gid;
	__u32 slot;
	__u32 count; /* inode_permission calls collapsed into this event */
	__u32 kind;
	__u32 group; /* the first check's hive_value.group */
	char comm[16];
	/* The process as hive_procs knew it when the burst opened (never read later). */
	__u64 exec_ns;
	/* The parent's parent, from the parent's entry: where user space starts the ancestry,
	 * which outlives a parent that exits before the event is read. 0 when unknown. */
	__u64 grandparent_start_ns;
	__u32 ppid;
	__u32 ns_pid;
	__u32 exe_flags;    /* HIVE_EXE_*: HIVE_EXE_UNKNOWN when the process was not known */
	__u32 parent_flags; /* HIVE_EXE_* of the parent */
	char parent_comm[16];
	char exe[HIVE_EXE_MAX];
	char parent_exe[HIVE_EXE_MAX];
	__u32 grandparent_pid;
	__u32 relation; /* HIVE_REL_* */
	/* Which files ran, as hive_proc records them (0 when unknown), and the root directory's
	 * device: the allow list holds only for the image's file, run from the container's root. */
	__u64 exe_ino;
	__u64 parent_exe_ino;
	__u32 exe_dev;
	__u32 parent_exe_dev;
	__u32 root_dev;
	__u32 cgroup_level; /* the cgroup's depth below the root, with cgroup_name (0 when empty) */
	/* Flood summaries: the bursts (and their checks) of this burst's flood key held in the
	 * kernel so far, cumulative since the key's hive_flood entry was made. User space reports
	 * the difference from the previous event of the key. */
	__u64 held_bursts;
	__u64 held_checks;
	/* For an entry of an image layer's group only (group != 0; else empty): the names of the
	 * accessing task's cgroup v2 directory and of its parent, as the kernel had them at the
	 * access (`<container id>` under `pod<uid>` for a kubelet's container). A one-shot container's
	 * cgroup is gone before user space reads the event; its names still say whose access it was. */
	char cgroup_name[HIVE_CGROUP_NAME_MAX];
	char cgroup_parent[HIVE_CGROUP_NAME_MAX];
};

/* A flood key: one executable's accesses to one trapped file from one cgroup (container),
 * under everything an allow decision reads of the process (its flags: loader environment,
 * tracing, layer; its parent and the parent's flags; its root and chroot). Each key may emit
 * hive_flood_budget bursts per window; beyond that its bursts are held (counted here, not put in
 * the ring buffer), so one container cannot take the ring buffer from another, a new executable
 * gets its own budget, and a held burst is always one an allow list judges as the emitted ones of
 * its key: an allowed program's flood cannot carry the same program run with LD_PRELOAD, traced,
 * in a chroot or under another parent. Each field has its hive_event field's name and width
 * (user space builds the key of an event from those: runtime/kernel/layout.ts). */
struct hive_flood_key {
	__u64 cgroup_id;
	__u64 exe_ino;
	__u64 parent_exe_ino;
	__u32 exe_dev;
	__u32 slot;
	__u32 parent_exe_dev;
	__u32 root_dev;
	__u32 exe_flags;
	__u32 parent_flags;
	__u32 relation;
	__u32 _pad;
};

struct hive_flood {
	__u64 window_ns;   /* start of the current window */
	__u64 held_bursts; /* cumulative */
	__u64 held_checks; /* cumulative: the checks those bursts collapsed */
	__u64 last_ns;     /* last burst of the key, emitted or held */
	__u32 emitted;     /* bursts emitted in the current window */
	__u32 _pad;
};

/* Trap proofs (runtime/kernel/trap-proof.ts): the identities the kernel saw when a Hive
 * thread registered in hive_provers checked a file with access(2). At most HIVE_PROOF_IDS
 * are kept per check (an overlay file shows two: the overlay's inode, then its layer's);
 * `count` says how many checks there were in all. */
#define HIVE_PROOF_IDS 4

struct hive_proof {
	__u32 count;
	__u32 _pad;
	struct hive_key ids[HIVE_PROOF_IDS];
};

/* Per-CPU counters, summed by user space. */
struct hive_counters {
	__u64 events; /* events submitted to the ring buffer */
	__u64 lost;   /* events whose ring-buffer reservation failed */
	__u64 checks; /* checks that matched a watch entry and a wanted mask */
	__u64 bursts; /* bursts opened (user space sweeps idle ones when this moves) */
	__u64 unfolded; /* bursts emitted at once, not folded with later checks: hive_bursts was full */
	__u64 held;     /* bursts held by flood summarisation (reported as counts, not one by one) */
	__u64 flood_full; /* bursts emitted without a flood budget: hive_flood was full */
	__u64 quiet;      /* checks of an image layer's entry skipped: hive_quiet holds their cgroup and group */
	__u64 denied;     /* accesses refused (EACCES) by a denying trap */
	__u64 allowed;    /* checks an allow entry let through in the kernel (no burst, no event) */
};

_Static_assert(sizeof(struct hive_key) == 16, "hive_key layout");
_Static_assert(sizeof(struct hive_value) == 24, "hive_value layout");
_Static_assert(sizeof(struct hive_proc) == 320, "hive_proc layout");
_Static_assert(sizeof(struct hive_event) == 896, "hive_event layout");
_Static_assert(sizeof(struct hive_counters) == 80, "hive_counters layout");
_Static_assert(sizeof(struct hive_quiet_key) == 16, "hive_quiet_key layout");
_Static_assert(sizeof(struct hive_flood_key) == 56, "hive_flood_key layout");
_Static_assert(sizeof(struct hive_flood) == 40, "hive_flood layout");
_Static_assert(sizeof(struct hive_proof) == 72, "hive_proof layout");
_Static_assert(sizeof(struct hive_allow_key) == 16, "hive_allow_key layout");
_Static_assert(sizeof(struct hive_allow) == 408, "hive_allow layout");

#endif
