/* SPDX-License-Identifier: GPL-2.0 */
/* Process identity, kept by the kernel so that an alert names the binary that really made
 * the access: hive_procs maps each thread group to the executable the kernel resolved at
 * exec (the file executed, through symlinks and relative paths, as a path from the
 * process's own root, so a container process shows the path inside its container), its
 * start and exec times and its parent. Short-lived processes are covered because the entry
 * is written at exec and copied into the event when the access happens; nothing is read
 * from /proc afterwards.
 *
 *   exec  (raw tracepoint sched_process_exec): a new entry from the task's mm->exe_file;
 *   fork  (raw tracepoint sched_process_fork): the child inherits its parent's entry;
 *   exit  (raw tracepoint sched_process_exit, in hive.bpf.c): the entry goes with the last thread;
 *   seed  (task iterator, run once at load): processes that predate the program, marked.
 *
 * Raw tracepoints and task iterators attach through BPF links, without perf_event_open:
 * CAP_BPF + CAP_PERFMON suffice in every attach mode.
 *
 * Included by hive.bpf.c (one object, one BTF). */
#ifndef HIVE_PROCESS_BPF_H
#define HIVE_PROCESS_BPF_H

/* Minimal kernel types; CO-RE relocates every field against the running kernel's BTF. */
struct qstr {
	__u32 len;
	const unsigned char *name;
} __attribute__((preserve_access_index));

struct dentry {
	struct dentry *d_parent;
	struct qstr d_name;
	struct super_block *d_sb;
	struct inode *d_inode; /* the changed file (hive.bpf.c hive_change) */
} __attribute__((preserve_access_index));

struct vfsmount {
	struct dentry *mnt_root;
} __attribute__((preserve_access_index));

struct mount {
	struct mount *mnt_parent;
	struct dentry *mnt_mountpoint;
	struct vfsmount mnt;
} __attribute__((preserve_access_index));

struct path {
	struct vfsmount *mnt;
	struct dentry *dentry;
} __attribute__((preserve_access_index));

struct file {
	struct path f_path;
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct mm_struct {
	struct file *exe_file;
	unsigned long env_start;
	unsigned long env_end;
} __attribute__((preserve_access_index));

#define HIVE_OVERLAYFS_MAGIC 0x794c7630

/* overlayfs's inode (fs/overlayfs/ovl_entry.h) embeds the VFS inode; its __upperdentry is set
 * once the file has a copy in the upper layer, i.e. was written or changed in the container.
 * A module's type: the loader reads the field's offset from vfs_inode in the module's BTF
 * (runtime/kernel/kernel-btf.ts overlayUpperOffset) — CO-RE against module BTF would need
 * CAP_SYS_ADMIN. 0: unknown, no overlay file is classified. */
const volatile __u32 hive_ovl_upper_off = 0;

struct fs_struct {
	struct path root;
} __attribute__((preserve_access_index));

struct upid {
	int nr;
	void *ns;
} __attribute__((preserve_access_index));

struct pid {
	unsigned int level;
	struct upid numbers[1];
} __attribute__((preserve_access_index));

typedef struct {
	__u32 val;
} hive_kuid_t;

struct cred {
	hive_kuid_t uid;
} __attribute__((preserve_access_index));

typedef struct {
	int counter;
} hive_atomic_t;

struct signal_struct {
	hive_atomic_t live;
} __attribute__((preserve_access_index));

/* The task's cgroup v2 directory (kernfs): names only, for layer accesses (hive_event_cgroup). */
struct kernfs_node {
	const char *name;
	struct kernfs_node *parent;
} __attribute__((preserve_access_index));

/* Linux 6.15 renamed kernfs_node's parent (now RCU-protected). */
struct kernfs_node___rcu {
	struct kernfs_node *__parent;
} __attribute__((preserve_access_index));

struct cgroup {
	int level;
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct css_set {
	struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));

struct task_struct {
	struct css_set *cgroups;
	int pid;
	int tgid;
	__u64 start_time;
	struct task_struct *real_parent;
	struct task_struct *group_leader;
	struct mm_struct *mm;
	struct fs_struct *fs;
	struct pid *thread_pid;
	const struct cred *cred;
	struct signal_struct *signal;
	unsigned int ptrace;
	char comm[16];
} __attribute__((preserve_access_index));

struct bpf_iter_meta;
struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} __attribute__((preserve_access_index));

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct hive_proc);
} hive_procs SEC(".maps");

/* Per-CPU room for what does not fit the 512-byte stack: the path under construction, the
 * entry being written, and a new burst. The path's write position lives here too, not in a
 * register: the verifier then sees an unknown (masked) offset on every iteration of the
 * walk and can merge the branches of one iteration, instead of following every path. */
/* Environment strings are read this many bytes at a time, at most HIVE_ENV_READS times. */
#define HIVE_ENV_CHUNK 256
#define HIVE_ENV_READS 512

struct hive_scratch {
	char path[2 * HIVE_EXE_MAX];
	char env[HIVE_ENV_CHUNK];
	__u32 off;
	__u32 flags;
	struct hive_proc proc;
	struct hive_event event;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hive_scratch);
} hive_scratch SEC(".maps");

static __always_inline struct hive_scratch *hive_scratch_get(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&hive_scratch, &zero);
}

/* The process start time that, with the tgid, identifies a thread group. */
static __always_inline __u64 hive_start_ns(struct task_struct *task)
{
	return BPF_CORE_READ(task, group_leader, start_time);
}

/* The task's tgid as its own pid namespace numbers it. */
static __always_inline __u32 hive_ns_pid(struct task_struct *task)
{
	struct task_struct *leader = BPF_CORE_READ(task, group_leader);
	struct pid *pid = BPF_CORE_READ(leader, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);
	int nr = 0;
	if (pid && level < 32)
		bpf_probe_read_kernel(&nr, sizeof(nr),
				      (void *)pid + bpf_core_field_offset(struct pid, numbers) +
					      level * bpf_core_type_size(struct upid) +
					      bpf_core_field_offset(struct upid, nr));
	return (__u32)nr;
}

/* Writes the path of the task's executable, from the task's root, right-aligned in
 * s->path[0..HIVE_EXE_MAX) and NUL-terminated at HIVE_EXE_MAX - 1; s->off is where it
 * starts. Walks dentries up to the root, crossing mounts as d_path does. 0 when the task
 * has no executable (a kernel thread, or one whose mm is gone). */
static __always_inline int hive_exe_path(struct task_struct *task, struct hive_scratch *s)
{
	struct file *exe = BPF_CORE_READ(task, mm, exe_file);
	if (!exe)
		return 0;
	struct dentry *dentry = BPF_CORE_READ(exe, f_path.dentry);
	struct vfsmount *vfsmnt = BPF_CORE_READ(exe, f_path.mnt);
	struct dentry *root = BPF_CORE_READ(task, fs, root.dentry);
	struct vfsmount *root_mnt = BPF_CORE_READ(task, fs, root.mnt);
	__u64 mnt_offset = bpf_core_field_offset(struct mount, mnt);
	s->off = HIVE_EXE_MAX - 1;
	s->flags = HIVE_EXE_TRUNCATED; /* cleared when the walk reaches a root */
	s->path[HIVE_EXE_MAX - 1] = 0;
	for (int i = 0; i < HIVE_PATH_DEPTH; i++) {
		if (dentry == root && vfsmnt == root_mnt) {
			s->flags = 0;
			break;
		}
		struct dentry *parent = BPF_CORE_READ(dentry, d_parent);
		if (dentry == BPF_CORE_READ(vfsmnt, mnt_root) || dentry == parent) {
			/* The root of a mount: continue from where it is mounted. */
			struct mount *mnt = (void *)vfsmnt - mnt_offset;
			struct mount *up = BPF_CORE_READ(mnt, mnt_parent);
			if (up == mnt) {
				/* The namespace's root and not the task's root: outside its root. */
				s->flags = HIVE_EXE_UNREACHABLE;
				break;
			}
			dentry = BPF_CORE_READ(mnt, mnt_mountpoint);
			vfsmnt = (void *)up + mnt_offset;
			continue;
		}
		__u32 len = BPF_CORE_READ(dentry, d_name.len);
		const unsigned char *name = BPF_CORE_READ(dentry, d_name.name);
		__u32 off = s->off;
		if (len + 1 > off)
			break; /* does not fit: stays HIVE_EXE_TRUNCATED, holding the path's end */
		off -= len;
		bpf_probe_read_kernel(&s->path[off & (HIVE_EXE_MAX - 1)], len & (HIVE_EXE_MAX - 1), name);
		off--;
		s->path[off & (HIVE_EXE_MAX - 1)] = '/';
		s->off = off;
		dentry = parent;
	}
	if (s->off == HIVE_EXE_MAX - 1) { /* the root directory itself */
		s->off = HIVE_EXE_MAX - 2;
		s->path[HIVE_EXE_MAX - 2] = '/';
	}
	return 1;
}

/* An overlay inode's upper dentry (NULL: the file is only in a lower, image, layer). */
static __always_inline void *hive_ovl_upper(struct inode *inode)
{
	void *upper = NULL;
	bpf_probe_read_kernel(&upper, sizeof(upper), (void *)inode + hive_ovl_upper_off);
	return upper;
}

/* Which file the task runs (p->exe_dev, p->exe_ino) and where it lives (HIVE_EXE_IMAGE,
 * HIVE_EXE_WRITTEN, HIVE_EXE_UNLINKED, or none of them). */
static __always_inline __u32 hive_exe_file(struct task_struct *task, struct hive_proc *p)
{
	struct inode *inode = BPF_CORE_READ(task, mm, exe_file, f_inode);
	p->exe_ino = BPF_CORE_READ(inode, i_ino);
	p->exe_dev = BPF_CORE_READ(inode, i_sb, s_dev);
	if (!inode)
		return 0;
	if (BPF_CORE_READ(inode, i_nlink) == 0)
		return HIVE_EXE_UNLINKED;
	if (BPF_CORE_READ(inode, i_sb, s_magic) != HIVE_OVERLAYFS_MAGIC || hive_ovl_upper_off == 0)
		return 0;
	return hive_ovl_upper(inode) ? HIVE_EXE_WRITTEN : HIVE_EXE_IMAGE;
}

/* True when the 16 bytes at `b` start with the `n`-byte `prefix`. */
static __always_inline int hive_starts(const char *b, const char *prefix, int n)
{
	for (int i = 0; i < n; i++)
		if (b[i] != prefix[i])
			return 0;
	return 1;
}

/* What the new program's environment asks the dynamic loader (read at exec, from the strings
 * the kernel just copied to its stack: later changes by the program cannot hide them). A
 * string is read HIVE_ENV_CHUNK bytes at a time; an environment too long to read whole is
 * HIVE_EXE_ENV_UNREAD, which no allow entry accepts. */
static __always_inline __u32 hive_env_flags(struct task_struct *task, struct hive_scratch *s)
{
	unsigned long pos = BPF_CORE_READ(task, mm, env_start);
	unsigned long end = BPF_CORE_READ(task, mm, env_end);
	__u32 flags = 0;
	int at_start = 1; /* the next read starts a string (not the rest of a long one) */
	for (int i = 0; i < HIVE_ENV_READS; i++) {
		if (pos >= end)
			return flags;
		long n = bpf_probe_read_user_str(s->env, HIVE_ENV_CHUNK, (void *)pos);
		if (n <= 0)
			return flags | HIVE_EXE_ENV_UNREAD;
		if (at_start && s->env[0] == 'L' && s->env[1] == 'D' && s->env[2] == '_') {
			if (hive_starts(s->env, "LD_PRELOAD=", 11))
				flags |= HIVE_EXE_LD_PRELOAD;
			else if (hive_starts(s->env, "LD_AUDIT=", 9))
				flags |= HIVE_EXE_LD_AUDIT;
			else if (hive_starts(s->env, "LD_LIBRARY_PATH=", 16))
				flags |= HIVE_EXE_LD_LIBRARY_PATH;
		}
		/* A full chunk may end mid-string: continue from its last byte (the NUL the helper wrote). */
		at_start = n < HIVE_ENV_CHUNK;
		pos += at_start ? n : n - 1;
	}
	return flags | HIVE_EXE_ENV_UNREAD;
}

/* Builds the entry of a thread-group leader from its task into s->proc. */
static __always_inline int hive_proc_from_task(struct task_struct *task, struct hive_scratch *s, __u32 source,
					       __u64 exec_ns)
{
	if (!hive_exe_path(task, s))
		return 0;
	struct hive_proc *p = &s->proc;
	/* Constant size from a masked offset: copies the path, its NUL and bytes the reader
	 * ignores (the verifier proves the read stays inside s->path). */
	bpf_probe_read_kernel(p->exe, HIVE_EXE_MAX, &s->path[s->off & (HIVE_EXE_MAX - 1)]);
	p->flags = source | s->flags | hive_exe_file(task, p);
	if (BPF_CORE_READ(task, ptrace))
		p->flags |= HIVE_EXE_TRACED;
	p->_pad = 0;
	p->start_ns = BPF_CORE_READ(task, start_time);
	p->exec_ns = exec_ns ? exec_ns : p->start_ns;
	struct task_struct *parent = BPF_CORE_READ(task, real_parent);
	p->ppid = BPF_CORE_READ(parent, tgid);
	p->parent_start_ns = hive_start_ns(parent);
	p->parent_exec_ns = 0;
	p->ns_pid = hive_ns_pid(task);
	p->uid = BPF_CORE_READ(task, cred, uid.val);
	return 1;
}

/* The entry of the task's thread group, or NULL when none or when it belongs to an earlier
 * process that had the same tgid. */
static __always_inline struct hive_proc *hive_proc_of(struct task_struct *task)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct hive_proc *p = bpf_map_lookup_elem(&hive_procs, &tgid);
	if (p && p->start_ns != hive_start_ns(task))
		return NULL;
	return p;
}

SEC("raw_tracepoint/sched_process_exec")
int hive_proc_exec(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx->args[0];
	struct hive_scratch *s = hive_scratch_get();
	if (!s || !hive_proc_from_task(task, s, HIVE_EXE_EXEC, bpf_ktime_get_ns()))
		return 0;
	struct hive_proc *p = &s->proc;
	p->flags |= hive_env_flags(task, s);
	/* The parent is the one that forked the process, whoever its parent is now (an orphan's
	 * adopter never vouches for it); what a process inherited stays with it through exec. */
	struct hive_proc *forked = hive_proc_of(task);
	if (forked) {
		p->ppid = forked->ppid;
		p->parent_start_ns = forked->parent_start_ns;
		p->parent_exec_ns = forked->parent_exec_ns;
		p->flags |= forked->flags & (HIVE_EXE_TRACED | HIVE_EXE_FORK_UNSEEN);
	} else {
		p->flags |= HIVE_EXE_FORK_UNSEEN;
	}
	__u32 tgid = BPF_CORE_READ(task, tgid);
	bpf_map_update_elem(&hive_procs, &tgid, p, BPF_ANY);
	return 0;
}

SEC("raw_tracepoint/sched_process_fork")
int hive_proc_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx->args[0];
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 tgid = BPF_CORE_READ(child, tgid);
	if (BPF_CORE_READ(child, pid) != tgid)
		return 0; /* a new thread of an existing process */
	struct hive_proc *from = hive_proc_of(parent);
	struct hive_scratch *s = hive_scratch_get();
	if (!from || !s)
		return 0; /* an unknown parent makes an unknown child: never guess */
	struct hive_proc *p = &s->proc;
	bpf_probe_read_kernel(p, sizeof(*p), from);
	p->start_ns = BPF_CORE_READ(child, start_time);
	p->exec_ns = p->start_ns;
	struct task_struct *real_parent = BPF_CORE_READ(child, real_parent);
	p->ppid = BPF_CORE_READ(real_parent, tgid);
	p->parent_start_ns = hive_start_ns(real_parent);
	p->parent_exec_ns = from->exec_ns;
	p->flags &= ~HIVE_EXE_FORK_UNSEEN; /* this fork was seen */
	p->ns_pid = hive_ns_pid(child);
	bpf_map_update_elem(&hive_procs, &tgid, p, BPF_ANY);
	return 0;
}

/* The exit of a thread (hive.bpf.c's hive_proc_exit): the entry goes with the last thread. */
static __always_inline void hive_proc_group_exit(struct task_struct *task)
{
	/* signal->live counts the group's threads not yet exiting: 0 once the last one is. */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return;
	__u32 tgid = BPF_CORE_READ(task, tgid);
	if (hive_proc_of(task))
		bpf_map_delete_elem(&hive_procs, &tgid);
}

SEC("iter/task")
int hive_proc_seed(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	if (!task)
		return 0;
	__u32 tgid = BPF_CORE_READ(task, tgid);
	if (BPF_CORE_READ(task, pid) != tgid)
		return 0;
	struct hive_scratch *s = hive_scratch_get();
	if (!s || !hive_proc_from_task(task, s, HIVE_EXE_SEED, 0))
		return 0;
	s->proc.flags |= HIVE_EXE_FORK_UNSEEN | HIVE_EXE_ENV_UNREAD;
	/* Only where exec and fork have not been seen: those entries are exact. */
	bpf_map_update_elem(&hive_procs, &tgid, &s->proc, BPF_NOEXIST);
	return 0;
}

/* True when the task's root directory is not the root of a mount (chroot into a directory);
 * `dev`, when given, receives the root's device. One read of the task's root for both. */
static __always_inline int hive_chrooted(struct task_struct *task, __u32 *dev)
{
	struct path root = BPF_CORE_READ(task, fs, root);
	if (dev)
		*dev = BPF_CORE_READ(root.dentry, d_sb, s_dev);
	return root.dentry != BPF_CORE_READ(root.mnt, mnt_root);
}

/* Marks a process seen traced: whatever a tracer changed stays in its memory. */
static __always_inline void hive_note_traced(struct task_struct *task, struct hive_proc *p)
{
	if (p && BPF_CORE_READ(task, ptrace))
		p->flags |= HIVE_EXE_TRACED;
}

/* PTRACE_MODE_ATTACH (include/linux/ptrace.h): the access ptrace(2), process_vm_writev(2) and
 * opening /proc/PID/mem are checked for. */
#define HIVE_PTRACE_MODE_ATTACH 0x02

/* Another process was let at this one's memory without attaching as its tracer
 * (process_vm_writev, a write through /proc/PID/mem): task->ptrace never shows it, so the
 * permission check itself marks the target traced (reads are checked the same way and marked too:
 * the check cannot tell them apart). Only processes already tracked are marked. */
static __always_inline int hive_memory_access(struct task_struct *target, unsigned int mode)
{
	if (!(mode & HIVE_PTRACE_MODE_ATTACH))
		return 0;
	struct hive_proc *p = hive_proc_of(target);
	if (p)
		p->flags |= HIVE_EXE_TRACED;
	return 0;
}

/* security_ptrace_access_check(child, mode): past the same-process and credential checks. */
SEC("kprobe/security_ptrace_access_check")
int handle_memory_access(struct pt_regs *ctx)
{
	return hive_memory_access((struct task_struct *)PT_REGS_PARM1(ctx), (unsigned int)PT_REGS_PARM2(ctx));
}

SEC("kprobe.multi/security_ptrace_access_check")
int handle_memory_access_multi(struct pt_regs *ctx)
{
	return hive_memory_access((struct task_struct *)PT_REGS_PARM1(ctx), (unsigned int)PT_REGS_PARM2(ctx));
}

SEC("fentry/security_ptrace_access_check")
int handle_memory_access_fentry(__u64 *ctx)
{
	return hive_memory_access((struct task_struct *)ctx[0], (unsigned int)ctx[1]);
}

/* Copies what the kernel knows of the current process and its parent into a new burst. */
/* The accessing task's cgroup directory and its parent by name, and its depth, for an image
 * layer's group (`wanted`); empty otherwise, so other events pay nothing. */
static __always_inline void hive_event_cgroup(struct hive_event *e, int wanted)
{
	e->cgroup_name[0] = 0;
	e->cgroup_parent[0] = 0;
	e->cgroup_level = 0;
	if (!wanted)
		return;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct cgroup *cgrp = BPF_CORE_READ(task, cgroups, dfl_cgrp);
	struct kernfs_node *kn = BPF_CORE_READ(cgrp, kn);
	if (!kn)
		return;
	e->cgroup_level = BPF_CORE_READ(cgrp, level);
	bpf_probe_read_kernel_str(e->cgroup_name, HIVE_CGROUP_NAME_MAX, BPF_CORE_READ(kn, name));
	struct kernfs_node *parent;
	if (bpf_core_field_exists(struct kernfs_node___rcu, __parent))
		parent = BPF_CORE_READ((struct kernfs_node___rcu *)kn, __parent);
	else
		parent = BPF_CORE_READ(kn, parent);
	if (parent)
		bpf_probe_read_kernel_str(e->cgroup_parent, HIVE_CGROUP_NAME_MAX, BPF_CORE_READ(parent, name));
}

static __always_inline void hive_event_identity(struct hive_event *e)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct hive_proc *p = hive_proc_of(task);
	hive_note_traced(task, p);
	e->ns_pid = hive_ns_pid(task);
	e->relation = hive_chrooted(task, &e->root_dev) ? HIVE_REL_CHROOT : 0;
	if (p) {
		e->exe_flags = p->flags;
		/* Deleted since the exec: the file that ran has no name any more. */
		if (BPF_CORE_READ(task, mm, exe_file, f_inode, i_nlink) == 0)
			e->exe_flags |= HIVE_EXE_UNLINKED;
		e->exec_ns = p->exec_ns;
		e->exe_ino = p->exe_ino;
		e->exe_dev = p->exe_dev;
		bpf_probe_read_kernel(e->exe, HIVE_EXE_MAX, p->exe);
	} else {
		e->exe_flags = HIVE_EXE_UNKNOWN;
		e->exec_ns = 0;
		e->exe_ino = 0;
		e->exe_dev = 0;
		e->exe[0] = 0;
	}
	struct task_struct *parent = BPF_CORE_READ(task, real_parent);
	e->ppid = BPF_CORE_READ(parent, tgid);
	BPF_CORE_READ_STR_INTO(&e->parent_comm, parent, comm);
	struct hive_proc *pp = hive_proc_of(parent);
	hive_note_traced(parent, pp);
	if (hive_chrooted(parent, NULL))
		e->relation |= HIVE_REL_PARENT_CHROOT;
	if (p && (p->ppid != e->ppid || p->parent_start_ns != hive_start_ns(parent)))
		e->relation |= HIVE_REL_REPARENTED;
	else if (p && pp && pp->exec_ns != p->parent_exec_ns)
		e->relation |= HIVE_REL_PARENT_EXECED;
	if (pp) {
		e->parent_flags = pp->flags;
		e->parent_exe_ino = pp->exe_ino;
		e->parent_exe_dev = pp->exe_dev;
		bpf_probe_read_kernel(e->parent_exe, HIVE_EXE_MAX, pp->exe);
		e->grandparent_pid = pp->ppid;
		e->grandparent_start_ns = pp->parent_start_ns;
	} else {
		e->parent_flags = HIVE_EXE_UNKNOWN;
		e->parent_exe_ino = 0;
		e->parent_exe_dev = 0;
		e->parent_exe[0] = 0;
		e->grandparent_pid = 0;
		e->grandparent_start_ns = 0;
	}
}

#endif
