/* SPDX-License-Identifier: GPL-2.0 */
/* Changes of a trapped file: unlink, rename and truncate name the file itself, so that a change
 * is an event on the file's own slot (deleted, renamed, replaced, truncated), and a rename over a
 * trapped file arms the file that takes its name at once (HIVE_KIND_FOLLOWED, hive_followed).
 * Each hook in the three attach modes, as inode_permission's.
 *
 * Included at the end of hive.bpf.c (one object, one BTF): it uses hive_check and the maps there. */
#ifndef HIVE_CHANGE_BPF_H
#define HIVE_CHANGE_BPF_H

/* Changes of a trapped file: the hooks below run only when a name is unlinked or renamed, or a
 * size set (rare next to inode_permission), and name the file itself, not its directory: the
 * change goes to the file's own slot, so a trap that wants no write still hears of it. The
 * inode comes from the dentry (CO-RE); `direct` as in hive_inode. */
static __always_inline int hive_change(struct dentry *dentry, __u32 change, int direct)
{
	if (!dentry)
		return 0;
	struct inode *inode = direct ? dentry->d_inode : BPF_CORE_READ(dentry, d_inode);
	if (!inode)
		return 0; /* a rename to a free name: nothing is replaced */
	__u64 ino = direct ? inode->i_ino : BPF_CORE_READ(inode, i_ino);
	if (!hive_bitmap_hit(ino))
		return 0;
	__u32 dev = direct ? inode->i_sb->s_dev : BPF_CORE_READ(inode, i_sb, s_dev);
	return hive_check(ino, dev, change, 0);
}

/* The file `from` is about to take the name of `onto`: when onto's file is trapped, from's file
 * is armed with the same entry at once (HIVE_KIND_FOLLOWED), so a second replacement within the
 * time user space takes to re-resolve is still seen. Never over an entry user space wrote. */
static __always_inline void hive_follow(struct dentry *from, struct dentry *onto, int direct)
{
	if (!from || !onto)
		return;
	struct inode *trapped = direct ? onto->d_inode : BPF_CORE_READ(onto, d_inode);
	struct inode *next = direct ? from->d_inode : BPF_CORE_READ(from, d_inode);
	if (!trapped || !next)
		return;
	struct hive_key key = { ._pad = 0 };
	key.ino = direct ? trapped->i_ino : BPF_CORE_READ(trapped, i_ino);
	if (!hive_bitmap_hit(key.ino))
		return;
	key.dev = direct ? trapped->i_sb->s_dev : BPF_CORE_READ(trapped, i_sb, s_dev);
	struct hive_value *watch = bpf_map_lookup_elem(&hive_watch, &key);
	if (!watch || watch->kind == HIVE_KIND_PARENT)
		return;
	struct hive_value armed = {
		.slot = watch->slot, .mask = watch->mask, .kind = HIVE_KIND_FOLLOWED, .action = watch->action
	};
	struct hive_key follower = { ._pad = 0 };
	follower.ino = direct ? next->i_ino : BPF_CORE_READ(next, i_ino);
	follower.dev = direct ? next->i_sb->s_dev : BPF_CORE_READ(next, i_sb, s_dev);
	if (bpf_map_update_elem(&hive_followed, &follower, &armed.slot, BPF_ANY))
		return; /* full: arming it unlisted could leave it behind */
	if (bpf_map_update_elem(&hive_watch, &follower, &armed, BPF_NOEXIST))
		return; /* watched already (user space's entry wins), or the map is full */
	__u32 word = (follower.ino & HIVE_BITMAP_MASK) >> 6;
	__u64 *bits = bpf_map_lookup_elem(&hive_bitmap, &word);
	/* A plain or: atomic or needs 5.12. A race with another CPU's write of the same word can only
	 * lose this bit, which the next sync of the map restores. */
	if (bits)
		*bits |= 1ULL << (follower.ino & 63);
}

/* security_inode_rename(old_dir, old_dentry, new_dir, new_dentry, flags), the same on every
 * supported kernel: the file renamed away, and the one it replaces (or, with RENAME_EXCHANGE,
 * the one that moves in exchange). The trap follows its name to the file that takes it. */
#define HIVE_RENAME_EXCHANGE 2
static __always_inline int hive_rename(struct dentry *old, struct dentry *new, __u32 flags, int direct)
{
	int exchange = flags & HIVE_RENAME_EXCHANGE;
	hive_change(old, HIVE_CHANGE_RENAMED, direct);
	hive_change(new, exchange ? HIVE_CHANGE_RENAMED : HIVE_CHANGE_REPLACED, direct);
	hive_follow(old, new, direct);
	if (exchange)
		hive_follow(new, old, direct);
	return 0;
}

/* security_inode_unlink(dir, dentry), the same on every supported kernel. */
SEC("kprobe/security_inode_unlink")
int handle_inode_unlink(struct pt_regs *ctx)
{
	return hive_change((struct dentry *)PT_REGS_PARM2(ctx), HIVE_CHANGE_DELETED, 0);
}

SEC("kprobe.multi/security_inode_unlink")
int handle_inode_unlink_multi(struct pt_regs *ctx)
{
	return hive_change((struct dentry *)PT_REGS_PARM2(ctx), HIVE_CHANGE_DELETED, 0);
}

SEC("fentry/security_inode_unlink")
int handle_inode_unlink_fentry(__u64 *ctx)
{
	return hive_change((struct dentry *)ctx[1], HIVE_CHANGE_DELETED, 1);
}

SEC("kprobe/security_inode_rename")
int handle_inode_rename(struct pt_regs *ctx)
{
	return hive_rename((struct dentry *)PT_REGS_PARM2(ctx), (struct dentry *)PT_REGS_PARM4(ctx), PT_REGS_PARM5(ctx), 0);
}

SEC("kprobe.multi/security_inode_rename")
int handle_inode_rename_multi(struct pt_regs *ctx)
{
	return hive_rename((struct dentry *)PT_REGS_PARM2(ctx), (struct dentry *)PT_REGS_PARM4(ctx), PT_REGS_PARM5(ctx), 0);
}

SEC("fentry/security_inode_rename")
int handle_inode_rename_fentry(__u64 *ctx)
{
	return hive_rename((struct dentry *)ctx[1], (struct dentry *)ctx[3], (__u32)ctx[4], 1);
}

/* do_truncate: what truncate(2), ftruncate(2) and open(O_TRUNC) all call to set a size.
 * truncate(2) and open(O_TRUNC) check MAY_WRITE first, but ftruncate(2) on a descriptor
 * opened earlier checks nothing, and a trap that wants no write drops those checks: only this
 * hook names every truncation. (security_path_truncate would miss O_TRUNC and ftruncate from
 * 6.2, which call security_file_truncate instead.) */
static __always_inline int hive_truncate_kprobe(struct pt_regs *ctx)
{
	/* Both read unconditionally, then selected (a select between context addresses is refused). */
	unsigned long a0 = PT_REGS_PARM1(ctx), a1 = PT_REGS_PARM2(ctx);
	return hive_change((struct dentry *)(hive_truncate_arg == 0 ? a0 : a1), HIVE_CHANGE_TRUNCATED, 0);
}

SEC("kprobe/do_truncate")
int handle_truncate(struct pt_regs *ctx)
{
	return hive_truncate_kprobe(ctx);
}

SEC("kprobe.multi/do_truncate")
int handle_truncate_multi(struct pt_regs *ctx)
{
	return hive_truncate_kprobe(ctx);
}

SEC("fentry/do_truncate")
int handle_truncate_fentry(__u64 *ctx)
{
	/* Branches, not a select: each argument has its own BTF type; the verifier prunes one. */
	if (hive_truncate_arg == 0)
		return hive_change((struct dentry *)ctx[0], HIVE_CHANGE_TRUNCATED, 1);
	return hive_change((struct dentry *)ctx[1], HIVE_CHANGE_TRUNCATED, 1);
}

#endif /* HIVE_CHANGE_BPF_H */
