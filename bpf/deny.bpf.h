/* Deny: the decision and its two ways in (included by hive.bpf.c, after the trap hook). */

/* Deny (a trap's `action: deny`), on security_inode_permission, which inode_permission calls
 * last, after its own checks and after the entry hook above opened or extended this thread's
 * burst; returning an error fails the check. Two ways in, the same decision: the BPF LSM's
 * inode_permission hook where `bpf` is an active LSM, else fmod_ret on the function (the agent
 * loads one of them, runtime/kernel/deny-mechanism.ts). Only a container's own file denies (its
 * overlay inode is that container's alone). Hive's prover threads are never refused. The outcome
 * is marked on the thread's burst of the same file, so the alert says it. `ret`: what ran before
 * (the other LSMs' verdict under fmod_ret, earlier BPF LSM programs' under the LSM): kept. */
static __always_inline int hive_deny_check(struct inode *inode, __u32 mask, int ret)
{
	if (ret || !(mask & (HIVE_MAY_READ | HIVE_MAY_WRITE | HIVE_MAY_APPEND | HIVE_MAY_EXEC)))
		return ret;
	__u64 ino = inode->i_ino;
	if (!hive_bitmap_hit(ino))
		return 0;
	struct hive_key key = { .ino = ino, .dev = inode->i_sb->s_dev, ._pad = 0 };
	struct hive_value *watch = bpf_map_lookup_elem(&hive_watch, &key);
	if (!watch || watch->action == HIVE_ACTION_ALERT || watch->kind == HIVE_KIND_PARENT ||
	    (watch->group && watch->group == watch->slot) || !(mask & watch->mask))
		return 0;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	if (hive_is_prover(pid_tgid))
		return 0;
	if (hive_allowed(watch, mask, 0))
		return 0; /* counted by the trap hook */
	int deny = watch->action == HIVE_ACTION_DENY;
	struct hive_event *burst = bpf_map_lookup_elem(&hive_bursts, &tid);
	if (burst && burst->ino == ino && burst->dev == key.dev)
		burst->mask |= deny ? HIVE_DENIED : HIVE_DENY_DRY_RUN;
	if (!deny)
		return 0;
	__u32 zero = 0;
	struct hive_counters *counters = bpf_map_lookup_elem(&hive_counters, &zero);
	if (counters)
		counters->denied++;
	return -13; /* -EACCES */
}

SEC("fmod_ret/security_inode_permission")
int hive_deny(__u64 *ctx)
{
	return hive_deny_check((struct inode *)ctx[0], (__u32)ctx[1], (int)ctx[2]);
}

SEC("lsm/inode_permission")
int hive_deny_lsm(__u64 *ctx)
{
	return hive_deny_check((struct inode *)ctx[0], (__u32)ctx[1], (int)ctx[2]);
}
