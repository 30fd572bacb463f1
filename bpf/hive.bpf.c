// SPDX-License-Identifier: GPL-2.0
/* Hive's trap program: reports accesses to watched files from inode_permission.
 *
 * Compiled once per architecture (CO-RE; bpf/build.sh: x86-64 and arm64 from this one source,
 * differing only in how a kprobe reads its arguments, regs.h and bpf_tracing.h's
 * PT_REGS_PARMn) and loaded unchanged on every supported kernel. The position of
 * the inode argument differs by kernel — (inode, mask) before 5.12, (user_namespace *,
 * inode, mask) from 5.12, (mnt_idmap *, inode, mask) from 6.3 — so the loader reads the
 * kernel's BTF and sets hive_inode_arg; the verifier prunes the branches not taken.
 *
 * Miss path, cheapest test first (it runs for every path component of every lookup):
 *   1. the mask, a register: pure MAY_EXEC checks (directory traversal) are dropped — the hook's
 *      whole body; what follows is a called function (hive_inode_direct, hive_inode_probed);
 *   2. one bit of i_ino in an array-map bitmap (lookup inlined by the verifier);
 *   3. the (dev, ino) hash lookup, then the wanted-mask test;
 *   4. for an image layer's entry only, the (cgroup, group) lookup in hive_quiet: a container no
 *      trap selects costs no burst and no event.
 * access(2) checks (MAY_ACCESS, rare) first ask whether the thread is proving a trap, only while
 * some thread is (hive_proving).
 * A hit on an entry whose trap has allow entries asks allow.bpf.h first: an allowed check is
 * counted and goes no further.
 *
 * Bursts: one user action calls inode_permission several times. Checks of one file by
 * one thread are folded into one pending event in hive_bursts (keyed by thread id) while
 * each follows the previous within hive_burst_gap_ns and the burst is younger than
 * hive_burst_max_ns. A burst ends when its thread hits another watched file or the gap or
 * age is exceeded: the kernel emits it when that thread next starts a burst, and user
 * space emits bursts idle for longer than the gap by reading hive_bursts, marking each in
 * hive_swept (thread id → first-check time) so that the kernel does not emit it again. */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "regs.h"
#include <bpf/bpf_tracing.h>
#include "hive.h"

char LICENSE[] SEC("license") = "GPL";

/* Minimal kernel types; CO-RE relocates the fields against the running kernel's BTF. */
struct super_block {
	__u32 s_dev;
	unsigned long s_magic;
} __attribute__((preserve_access_index));

struct inode {
	struct super_block *i_sb;
	unsigned long i_ino;
	unsigned int i_nlink;
} __attribute__((preserve_access_index));

/* Load-time configuration (read-only data, set by the loader before load). */
const volatile __u32 hive_inode_arg = 1; /* 0: (inode, mask), 1: (ns/idmap, inode, mask) */
/* do_truncate's dentry: 0 (dentry, length, ...) before 5.12, 1 (ns/idmap, dentry, ...) after. */
const volatile __u32 hive_truncate_arg = 1;
const volatile __u64 hive_burst_gap_ns = 5000000;
const volatile __u64 hive_burst_max_ns = 250000000;
/* Flood summarisation: bursts one flood key may emit per window (0: off), and the window. */
const volatile __u32 hive_flood_budget = 8;
const volatile __u64 hive_flood_window_ns = 1000000000;

#define HIVE_INTERESTING (HIVE_MAY_WRITE | HIVE_MAY_READ | HIVE_MAY_APPEND | HIVE_MAY_ACCESS | HIVE_MAY_OPEN)

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct hive_key);
	__type(value, struct hive_value);
} hive_watch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HIVE_BITMAP_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} hive_bitmap SEC(".maps");

/* Pending bursts by thread id. A plain hash, not an LRU: an entry leaves only when it is
 * emitted (its thread's next burst, or its thread's exit), never evicted unseen; when the
 * table is full a new burst is emitted at once instead (counted as unfolded). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct hive_event);
} hive_bursts SEC(".maps");

/* Bursts user space has already delivered from hive_bursts (the sweep), by thread id → the
 * burst's first-check time: the kernel does not emit them again when their thread starts a
 * new burst, and a restarted agent's sweep skips them. Pinned, so a restart keeps it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
#ifdef HIVE_LAYOUT_VARIANT
	__uint(max_entries, 4096); /* the upgrade test's "earlier version" with another map layout */
#else
	__uint(max_entries, 8192);
#endif
	__type(key, __u32);
	__type(value, __u64);
} hive_swept SEC(".maps");

/* 16 MiB (about 18,000 bursts of 904 bytes): the space of what was read stays taken until the
 * agent has spooled it (ring-reader.ts), so this is also what a stalled agent can hold without loss. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} hive_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hive_counters);
} hive_counters SEC(".maps");

/* Flood keys (struct hive_flood_key → hive_flood). A plain hash, not an LRU: an entry with held
 * counts is never evicted unseen; user space removes idle, fully reported entries. When it is
 * full, a new key's bursts are emitted without a budget (counted in flood_full). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct hive_flood_key);
	__type(value, struct hive_flood);
} hive_flood SEC(".maps");

/* Entries the rename hook armed (HIVE_KIND_FOLLOWED), key → slot: user space looks here, not
 * through all of hive_watch, for entries it did not write, and removes those it does not want. A
 * plain hash, listed before it is armed: no followed entry goes unlisted (when this is full, the
 * rename hook arms nothing until user space has reconciled). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct hive_key);
	__type(value, __u32);
} hive_followed SEC(".maps");

/* Cgroups whose accesses to an image layer's file alert nobody (struct hive_quiet_key → 1).
 * An LRU: a flood of cgroups can never fill it; an evicted entry costs one more event, after
 * which user space writes it again. Never a reason to skip anything but a layer entry's check. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct hive_quiet_key);
	__type(value, __u8);
} hive_quiet SEC(".maps");

#include "process.bpf.h"
#include "allow.bpf.h"
#include "prove.bpf.h"
#include "overlay.bpf.h"

static __always_inline int hive_bitmap_hit(__u64 ino)
{
	__u32 word = (ino & HIVE_BITMAP_MASK) >> 6;
	__u64 *bits = bpf_map_lookup_elem(&hive_bitmap, &word);
	return bits && (*bits & (1ULL << (ino & 63)));
}

/* True when the burst is held (counted in its flood key) instead of emitted; otherwise the
 * burst carries its key's cumulative held counts. Parent (control) events and changes of the
 * file are never held. */
static __always_inline int hive_flood_held(struct hive_event *burst, struct hive_counters *counters)
{
	burst->held_bursts = 0;
	burst->held_checks = 0;
	if (hive_flood_budget == 0 || burst->kind == HIVE_KIND_PARENT || (burst->mask & HIVE_CHANGES))
		return 0;
	struct hive_flood_key key = {
		.cgroup_id = burst->cgroup_id,
		.exe_ino = burst->exe_ino,
		.parent_exe_ino = burst->parent_exe_ino,
		.exe_dev = burst->exe_dev,
		.slot = burst->slot,
		.parent_exe_dev = burst->parent_exe_dev,
		.root_dev = burst->root_dev,
		.exe_flags = burst->exe_flags,
		.parent_flags = burst->parent_flags,
		.relation = burst->relation,
		._pad = 0,
	};
	__u64 now = burst->last_ns;
	struct hive_flood *f = bpf_map_lookup_elem(&hive_flood, &key);
	if (!f) {
		struct hive_flood fresh = { .window_ns = now, .last_ns = now, .emitted = 1 };
		if (bpf_map_update_elem(&hive_flood, &key, &fresh, BPF_NOEXIST) == -7 /* E2BIG: full */)
			counters->flood_full++;
		return 0;
	}
	f->last_ns = now;
	if (now - f->window_ns >= hive_flood_window_ns) {
		f->window_ns = now;
		f->emitted = 0;
	}
	if (f->emitted < hive_flood_budget) {
		f->emitted++;
		burst->held_bursts = f->held_bursts;
		burst->held_checks = f->held_checks;
		return 0;
	}
	__sync_fetch_and_add(&f->held_bursts, 1);
	__sync_fetch_and_add(&f->held_checks, burst->count);
	counters->held++;
	return 1;
}

static __always_inline void hive_emit(struct hive_event *burst, struct hive_counters *counters)
{
	if (hive_flood_held(burst, counters))
		return;
	/* The burst already sits in map memory: bpf_ringbuf_output copies it in the kernel
	 * (one helper call) where reserve + submit needed a copy in BPF. */
	if (bpf_ringbuf_output(&hive_events, burst, sizeof(*burst), 0))
		counters->lost++; /* the reservation failed: the ring buffer is full */
	else
		counters->events++;
}

/* The hit path, shared by all programs once the inode's identity is known. */
static __always_inline int hive_check(__u64 ino, __u32 dev, __u32 mask, int parents_only)
{
	struct hive_key key = { .ino = ino, .dev = dev, ._pad = 0 };
	struct hive_value *watch = bpf_map_lookup_elem(&hive_watch, &key);
	if (!watch)
		return 0;
	/* An image layer's own entry (group == slot: bpf/hive.h), checked inside an overlay's check:
	 * judged by what the overlay was asked (overlay.bpf.h). */
	if (watch->group == watch->slot && watch->group && !parents_only && !(mask & HIVE_CHANGES))
		mask = hive_ovl_asked(ino, mask);
	if (!(mask & watch->mask))
		return 0;
	if (parents_only && watch->kind != HIVE_KIND_PARENT)
		return 0;

	__u32 zero = 0;
	struct hive_counters *counters = bpf_map_lookup_elem(&hive_counters, &zero);
	if (!counters)
		return 0;
	/* An image layer's own entry (group == slot: bpf/hive.h), for an access, not a change (a
	 * change asks user space to re-resolve, whoever makes it): a cgroup quieted for the group is
	 * skipped before its burst is touched, so a pending burst of that thread stays as it was.
	 * Other entries never pay this lookup. */
	if (watch->group == watch->slot && watch->group && !(mask & HIVE_CHANGES)) {
		struct hive_quiet_key quiet = { .cgroup_id = bpf_get_current_cgroup_id(), .group = watch->group, ._pad = 0 };
		if (bpf_map_lookup_elem(&hive_quiet, &quiet)) {
			counters->quiet++;
			return 0;
		}
	}
	/* A check an allow entry lets through is counted, never a burst: only what is alerted (or
	 * denied) reaches the ring buffer and flood summaries. Changes ask user space to re-resolve. */
	if (!parents_only && !(mask & HIVE_CHANGES)) {
		int allowed = hive_allow_follows(watch) || hive_allowed(watch, mask, 1);
		if (watch->flags & HIVE_WATCH_ALLOW)
			hive_allow_mark_own(watch, allowed);
		if (allowed) {
			counters->allowed++;
			return 0;
		}
	}
	counters->checks++;

	__u64 now = bpf_ktime_get_ns();
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct hive_event *burst = bpf_map_lookup_elem(&hive_bursts, &tid);
	if (burst) {
		/* One file, or a file checked under two identities (overlay then image layer). */
		int same = (burst->ino == ino && burst->dev == dev) || (watch->group && burst->group == watch->group);
		if (same && now - burst->last_ns < hive_burst_gap_ns && now - burst->ktime_ns < hive_burst_max_ns) {
			burst->count++;
			burst->mask |= mask;
			burst->last_ns = now;
			return 0;
		}
		__u64 *swept = bpf_map_lookup_elem(&hive_swept, &tid);
		if (!swept || *swept != burst->ktime_ns)
			hive_emit(burst, counters);
	}

	/* The event is larger than the stack: assemble it in per-CPU scratch. */
	struct hive_scratch *s = hive_scratch_get();
	if (!s)
		return 0;
	struct hive_event *next = &s->event;
	__u64 uid_gid = bpf_get_current_uid_gid();
	next->ktime_ns = now;
	next->last_ns = now;
	next->ino = ino;
	next->cgroup_id = bpf_get_current_cgroup_id();
	next->dev = dev;
	next->mask = mask;
	next->pid = tid;
	next->tgid = pid_tgid >> 32;
	next->uid = (__u32)uid_gid;
	next->gid = uid_gid >> 32;
	next->slot = watch->slot;
	next->count = 1;
	next->kind = watch->kind;
	next->group = watch->group;
	next->held_bursts = 0; /* set at emission (hive_flood_held); a swept burst carries none */
	next->held_checks = 0;
	bpf_get_current_comm(next->comm, sizeof(next->comm));
	hive_event_identity(next);
	hive_event_cgroup(next, watch->group != 0);
	counters->bursts++;
	if (bpf_map_update_elem(&hive_bursts, &tid, next, BPF_ANY)) {
		counters->unfolded++;
		hive_emit(next, counters);
	}
	return 0;
}

/* Every thread's exit: its pending burst can have no successor, so it is emitted now (unless
 * a sweep delivered it) and its entry freed: hive_bursts holds live threads only. Then the
 * process-tracking part (process.bpf.h). */
SEC("raw_tracepoint/sched_process_exit")
int hive_proc_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx->args[0];
	__u32 tid = BPF_CORE_READ(task, pid);
	struct hive_event *burst = bpf_map_lookup_elem(&hive_bursts, &tid);
	if (burst) {
		__u32 zero = 0;
		struct hive_counters *counters = bpf_map_lookup_elem(&hive_counters, &zero);
		__u64 *swept = bpf_map_lookup_elem(&hive_swept, &tid);
		if (counters && (!swept || *swept != burst->ktime_ns))
			hive_emit(burst, counters);
		bpf_map_delete_elem(&hive_bursts, &tid);
	}
	hive_proc_group_exit(task);
	return 0;
}

/* What follows the mask test: whether a prover checks, the bitmap, then the device and the map.
 * `direct` (a constant after inlining) picks plain loads for BTF pointers (fentry) or probe reads
 * (kprobes). */
static __always_inline int hive_inode_wanted(struct inode *inode, __u32 mask, int parents_only, int direct)
{
	if (!parents_only && (mask & HIVE_MAY_ACCESS) && hive_prove(inode, direct))
		return 0;
	if (!parents_only && (mask & (HIVE_MAY_WRITE | HIVE_MAY_APPEND)))
		hive_ovl_note(inode, mask, direct);
	__u64 ino = direct ? inode->i_ino : BPF_CORE_READ(inode, i_ino);
	if (!hive_bitmap_hit(ino))
		return 0;
	__u32 dev = direct ? inode->i_sb->s_dev : BPF_CORE_READ(inode, i_sb, s_dev);
	return hive_check(ino, dev, mask, parents_only);
}

/* Called, not inlined: most checks stop at the mask test (directory traversal), and a hook whose
 * own body is that test alone needs no callee-saved register, so its JIT'd entry saves none. */
static __noinline int hive_inode_direct(struct inode *inode, __u32 mask, int parents_only)
{
	return hive_inode_wanted(inode, mask, parents_only, 1);
}

static __noinline int hive_inode_probed(struct inode *inode, __u32 mask, int parents_only)
{
	return hive_inode_wanted(inode, mask, parents_only, 0);
}

/* Every entry point after it has found the inode and mask: the mask (a register) first, the
 * rest only when it asks for something the hook wants. */
static __always_inline int hive_inode(struct inode *inode, __u32 mask, __u32 wanted, int parents_only,
				      int direct)
{
#ifdef HIVE_PROGRAM_VARIANT
	/* The upgrade test's "earlier version": the same maps, other instructions. */
	if (mask == 0xffffffff)
		return 0;
#endif
#ifdef HIVE_EMPTY_VARIANT
	/* The benchmark's floor: the hook attached, doing nothing. */
	return 0;
#endif
	if (!(mask & wanted))
		return 0;
	return direct ? hive_inode_direct(inode, mask, parents_only) : hive_inode_probed(inode, mask, parents_only);
}

/* The kprobe program, attached one of two ways (the loader picks per kernel, see
 * runtime/kernel/attach.ts): through a kprobe.multi BPF link (5.18+ with CONFIG_FPROBE),
 * which needs only CAP_BPF + CAP_PERFMON, or through perf_event_open, which Debian's and
 * Ubuntu's perf_event_paranoid patch reserves to CAP_SYS_ADMIN. Same body, two sections:
 * the load-time attach type differs. */
static __always_inline int hive_kprobe(struct pt_regs *ctx)
{
	/* Read all three argument registers unconditionally and select values: a select
	 * between context addresses would be rejected ("dereference of modified ctx ptr"). */
	unsigned long a0 = PT_REGS_PARM1(ctx), a1 = PT_REGS_PARM2(ctx), a2 = PT_REGS_PARM3(ctx);
	int two_args = hive_inode_arg == 0;
	struct inode *inode = (struct inode *)(two_args ? a0 : a1);
	return hive_inode(inode, two_args ? a1 : a2, HIVE_INTERESTING, 0, 0);
}

SEC("kprobe/inode_permission")
int handle_inode_permission(struct pt_regs *ctx)
{
	return hive_kprobe(ctx);
}

SEC("kprobe.multi/inode_permission")
int handle_inode_permission_multi(struct pt_regs *ctx)
{
	return hive_kprobe(ctx);
}

/* Only where GCC split inode_permission (Debian 5.10: may_create/may_delete call a local
 * inode_permission.part.0 the hook never sees): directory-entry checks for parent
 * watches, from security_inode_permission(inode, mask), which that clone still calls.
 * One program per attach mode; not autoloaded elsewhere. */
SEC("kprobe/security_inode_permission")
int handle_security_inode_permission(struct pt_regs *ctx)
{
	return hive_inode((struct inode *)PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), HIVE_MAY_WRITE, 1, 0);
}

SEC("kprobe.multi/security_inode_permission")
int handle_security_inode_permission_multi(struct pt_regs *ctx)
{
	return hive_inode((struct inode *)PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), HIVE_MAY_WRITE, 1, 0);
}

SEC("fentry/security_inode_permission")
int handle_security_inode_permission_fentry(__u64 *ctx)
{
	return hive_inode((struct inode *)ctx[0], (__u32)ctx[1], HIVE_MAY_WRITE, 1, 1);
}

/* fentry: arguments arrive as u64 slots; inode is a BTF pointer, read directly. */
SEC("fentry/inode_permission")
int handle_inode_permission_fentry(__u64 *ctx)
{
	/* ctx[2] exists only with three arguments, so it is read only in that branch, which the
	 * verifier prunes on two-argument kernels; ctx[1] is read once for both (a load from a
	 * computed context offset would be refused). The mask is tested before the inode is read. */
	__u64 a1 = ctx[1];
	if (hive_inode_arg == 0)
		return hive_inode((struct inode *)ctx[0], (__u32)a1, HIVE_INTERESTING, 0, 1);
	return hive_inode((struct inode *)a1, (__u32)ctx[2], HIVE_INTERESTING, 0, 1);
}

#include "deny.bpf.h"
#include "change.bpf.h"
