/* SPDX-License-Identifier: GPL-2.0 */
/* The allow decision in the kernel: whether a check of a trapped file is one a trap's allow list
 * lets through, decided on what process.bpf.h recorded at exec, the same facts user space judges
 * an event by (runtime/alerts/allowlist.ts). An allowed check opens no burst and emits no event
 * (counted per entry in hive_allow and in hive_counters.allowed), and a denying trap lets it pass.
 *
 * An `exe` entry holds for the file discover found at the entry's exact path in the accessing
 * container (hive_allow's key: that file's identity, the container's overlay device), run exactly
 * as the image shipped it: recorded at exec (not seeded), its path whole, an image layer's file
 * unchanged (for a host path: not written, not unlinked), nothing asked of the dynamic loader, the
 * environment read, never traced, not chrooted, and its root on the executable's overlay. A
 * `parent-exe` entry holds the same way for the parent, which must also be the process that forked
 * this one, still running what it ran then. Anything unknown is not allowed here: user space then
 * receives the access and decides (and alerts) as before.
 *
 * Included after process.bpf.h (hive_proc_of, hive_chrooted, hive_start_ns). */
#ifndef HIVE_ALLOW_BPF_H
#define HIVE_ALLOW_BPF_H

/* Keys only user space writes (runtime/kernel/allow-map.ts); the kernel adds to `allowed` in
 * place. Not preallocated: most nodes hold few. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct hive_allow_key);
	__type(value, struct hive_allow);
} hive_allow SEC(".maps");

/* The layer check that belongs to an allowed check: one access to a container's own (overlay) file
 * checks the image layer's file beneath it right after, in the same thread (ovl_permission). The
 * own check's outcome is left here, per CPU, for that layer check to follow: allowed, it is
 * skipped too; otherwise it folds into the own check's burst as before. Only a layer check is ever
 * skipped this way, never a file's own check, within HIVE_ALLOW_MARK_NS of the mark. */
#define HIVE_ALLOW_MARK_NS 1000000
struct hive_allow_mark {
	__u64 ktime_ns;
	__u32 tid;
	__u32 group;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hive_allow_mark);
} hive_allow_marks SEC(".maps");

/* A container's own entry (group != slot) was checked: remember whether it was allowed. */
static __always_inline void hive_allow_mark_own(struct hive_value *watch, int allowed)
{
	if (!watch->group || watch->group == watch->slot)
		return;
	__u32 zero = 0;
	struct hive_allow_mark *m = bpf_map_lookup_elem(&hive_allow_marks, &zero);
	if (!m)
		return;
	m->tid = allowed ? (__u32)bpf_get_current_pid_tgid() : 0;
	m->group = watch->group;
	m->ktime_ns = allowed ? bpf_ktime_get_ns() : 0;
}

/* True for an image layer's check (group == slot) right after this thread's allowed own check of
 * the same group; the mark is used up. */
static __always_inline int hive_allow_follows(struct hive_value *watch)
{
	if (!watch->group || watch->group != watch->slot)
		return 0;
	__u32 zero = 0;
	struct hive_allow_mark *m = bpf_map_lookup_elem(&hive_allow_marks, &zero);
	if (!m || !m->tid || m->tid != (__u32)bpf_get_current_pid_tgid() || m->group != watch->group)
		return 0;
	int fresh = bpf_ktime_get_ns() - m->ktime_ns < HIVE_ALLOW_MARK_NS;
	m->tid = 0;
	return fresh;
}

/* The runner's own facts: what it runs came from where the trap allows, exactly as shipped.
 * `own` adds the checks made of the accessing process only (its executable unlinked since). */
static __always_inline int hive_runner_clean(struct hive_proc *p, struct task_struct *task, __u32 host, int own)
{
	__u32 f = p->flags;
	if ((f & HIVE_EXE_SOURCE_MASK) != HIVE_EXE_EXEC)
		return 0;
	if (f & (HIVE_EXE_TRUNCATED | HIVE_EXE_UNREACHABLE | HIVE_EXE_WRITTEN | HIVE_EXE_UNLINKED |
		 HIVE_EXE_LD_PRELOAD | HIVE_EXE_LD_AUDIT | HIVE_EXE_LD_LIBRARY_PATH | HIVE_EXE_ENV_UNREAD |
		 HIVE_EXE_TRACED))
		return 0;
	if (!host && !(f & HIVE_EXE_IMAGE))
		return 0;
	if (BPF_CORE_READ(task, ptrace))
		return 0;
	if (own && BPF_CORE_READ(task, mm, exe_file, f_inode, i_nlink) == 0)
		return 0;
	return 1;
}

/* The parent's key, when the parent vouches: it forked this process (seen), has not run another
 * executable since, is not chrooted, and runs a clean file the trap's keys name. */
static __always_inline struct hive_allow *hive_parent_rules(struct task_struct *task, struct hive_proc *p,
							    __u32 slot)
{
	if (p->flags & HIVE_EXE_FORK_UNSEEN)
		return NULL;
	struct task_struct *parent = BPF_CORE_READ(task, real_parent);
	struct hive_proc *pp = hive_proc_of(parent);
	if (!pp || p->ppid != (__u32)BPF_CORE_READ(parent, tgid) || p->parent_start_ns != hive_start_ns(parent) ||
	    pp->exec_ns != p->parent_exec_ns || hive_chrooted(parent, NULL))
		return NULL;
	struct hive_allow_key key = { .ino = pp->exe_ino, .dev = pp->exe_dev, .slot = slot };
	struct hive_allow *r = bpf_map_lookup_elem(&hive_allow, &key);
	if (!r || !hive_runner_clean(pp, parent, r->host, 0))
		return NULL;
	return r;
}

/* The first entry that holds, given which entries name the runner's file and the parent's, and
 * whose `accesses` take this check's kinds; -1 when none. */
static __always_inline int hive_allow_entry(struct hive_allow *r, __u32 exe_bits, __u32 parent_bits, __u32 mask)
{
	__u32 holds = (exe_bits | ~r->needs_exe) & (parent_bits | ~r->needs_parent) &
		      (r->needs_exe | r->needs_parent) & r->decided;
	__u32 kinds = mask & HIVE_ALLOW_KINDS;
	for (int i = 0; i < HIVE_ALLOW_ENTRIES; i++) {
		if (!(holds >> i))
			break;
		if (!(holds & (1u << i)))
			continue;
		__u32 k = r->kinds[i];
		if (k == HIVE_ALLOW_ANY || (kinds && !(kinds & ~k)))
			return i;
	}
	return -1;
}

/* True when an allow entry of the trap behind `watch` holds for this check by the current task;
 * `count` adds it to the entry's count (the trap hook; the deny hook only asks). */
static __always_inline int hive_allowed(struct hive_value *watch, __u32 mask, int count)
{
	if (!(watch->flags & HIVE_WATCH_ALLOW))
		return 0;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct hive_proc *p = hive_proc_of(task);
	if (!p)
		return 0;
	struct hive_allow_key key = { .ino = p->exe_ino, .dev = p->exe_dev, .slot = watch->slot };
	struct hive_allow *r = bpf_map_lookup_elem(&hive_allow, &key);
	__u32 exe_bits = 0;
	if (r) {
		__u32 root_dev = 0;
		int chroot = hive_chrooted(task, &root_dev);
		if (!chroot && hive_runner_clean(p, task, r->host, 1) && (r->host || root_dev == p->exe_dev))
			exe_bits = r->exe;
	}
	struct hive_allow *pr = NULL;
	__u32 parent_bits = 0;
	if (watch->flags & HIVE_WATCH_ALLOW_PARENT) {
		pr = hive_parent_rules(task, p, watch->slot);
		if (pr)
			parent_bits = pr->parent;
	}
	struct hive_allow *rules = r ? r : pr;
	if (!rules)
		return 0;
	int entry = hive_allow_entry(rules, exe_bits, parent_bits, mask);
	if (entry < 0)
		return 0;
	if (count)
		__sync_fetch_and_add(&rules->allowed[entry & (HIVE_ALLOW_ENTRIES - 1)], 1);
	return 1;
}

#endif
