/* SPDX-License-Identifier: GPL-2.0 */
/* Trap proofs (runtime/kernel/trap-proof.ts): a Hive thread about to arm a trap checks its file
 * once with access(2), and the program records which identities that check went through, so that
 * user space arms the one the kernel really checks. Never an alert.
 *
 * Included by hive.bpf.c after its minimal kernel types (struct inode). */
#ifndef HIVE_PROVE_BPF_H
#define HIVE_PROVE_BPF_H

/* Trap proofs: a Hive thread (thread id → its process id) about to check a trap's file with
 * access(2) registers here; its checks are recorded in hive_proofs (thread id → identities)
 * instead of being matched, so user space learns the identity the kernel really checks (an
 * overlay's inode is not the one stat() reports) and arms that one. Never an alert. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} hive_provers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct hive_proof);
} hive_proofs SEC(".maps");

/* How many provers are registered (or were, if one died in between: a count left high only costs
 * the lookup below). User space adds one before registering in hive_provers and takes it away
 * after, through the map's memory (runtime/kernel/trap-proof.ts); while it is zero an access(2)
 * check asks nothing more: an array lookup the verifier inlines, where hive_provers is a hash. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u32);
} hive_proving SEC(".maps");

/* True for a registered prover thread of the process that registered it (not a stale entry
 * whose thread id another process reuses). */
static __always_inline int hive_is_prover(__u64 pid_tgid)
{
	__u32 tid = (__u32)pid_tgid;
	__u32 *tgid = bpf_map_lookup_elem(&hive_provers, &tid);
	return tgid && *tgid == (__u32)(pid_tgid >> 32);
}

/* Records the identity of an access(2) check by a registered prover thread; true when it
 * did (the check is then not matched against the watch map). */
static __always_inline int hive_prove(struct inode *inode, int direct)
{
	__u32 zero = 0;
	__u32 *proving = bpf_map_lookup_elem(&hive_proving, &zero);
	if (!proving || !*proving)
		return 0; /* nobody is proving: no thread is looked up */
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	if (!hive_is_prover(pid_tgid))
		return 0;
	struct hive_proof *proof = bpf_map_lookup_elem(&hive_proofs, &tid);
	if (!proof) {
		struct hive_proof empty = {};
		bpf_map_update_elem(&hive_proofs, &tid, &empty, BPF_NOEXIST);
		proof = bpf_map_lookup_elem(&hive_proofs, &tid);
		if (!proof)
			return 1;
	}
	__u32 n = proof->count;
	if (n < HIVE_PROOF_IDS) {
		struct hive_key *id = &proof->ids[n & (HIVE_PROOF_IDS - 1)];
		id->ino = direct ? inode->i_ino : BPF_CORE_READ(inode, i_ino);
		id->dev = direct ? inode->i_sb->s_dev : BPF_CORE_READ(inode, i_sb, s_dev);
		id->_pad = 0;
	}
	proof->count = n + 1;
	return 1;
}

#endif
