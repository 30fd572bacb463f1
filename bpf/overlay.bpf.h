/* What an overlay asked of an image layer's file (included by hive.bpf.c).
 *
 * An overlay checks a file that is only in an image layer twice: the overlay's own inode with the
 * caller's mask (inode_permission's entry, where the trap hook runs), then, inside ovl_permission,
 * the layer's inode with write and append turned into read (the file is copied up to the
 * container's layer before it is written). A layer's entry sees only the second check. The first
 * is noted here, per CPU, so that the second is judged by what the caller asked as well: a [write]
 * trap on an image's file fires before the container's own copy is armed, and a write is reported
 * as one (with the read the copy-up makes).
 * Only writes of files with no copy in the container's layer are noted (a file's first write,
 * which copies it up): every other check costs a mask test. The note is for the same thread and
 * the same inode number (an overlay whose layers share one filesystem, as containerd's snapshots
 * do, gives its inode the layer's number), within a burst gap, and is used once. */

struct hive_ovl_write {
	__u64 ktime_ns;
	__u64 ino;
	__u32 tid;
	__u32 mask;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hive_ovl_write);
} hive_ovl_writes SEC(".maps");

/* At the overlay's own check: a write of a file only in a lower layer is noted. */
static __always_inline void hive_ovl_note(struct inode *inode, __u32 mask, int direct)
{
	unsigned long magic = direct ? inode->i_sb->s_magic : BPF_CORE_READ(inode, i_sb, s_magic);
	if (magic != HIVE_OVERLAYFS_MAGIC || hive_ovl_upper_off == 0 || hive_ovl_upper(inode))
		return;
	__u32 zero = 0;
	struct hive_ovl_write *w = bpf_map_lookup_elem(&hive_ovl_writes, &zero);
	if (!w)
		return;
	w->ktime_ns = bpf_ktime_get_ns();
	w->ino = direct ? inode->i_ino : BPF_CORE_READ(inode, i_ino);
	w->tid = (__u32)bpf_get_current_pid_tgid();
	w->mask = mask;
}

/* At a layer entry's check: its mask and the one the overlay was asked, when this check is its inner one. */
static __always_inline __u32 hive_ovl_asked(__u64 ino, __u32 mask)
{
	__u32 zero = 0;
	struct hive_ovl_write *w = bpf_map_lookup_elem(&hive_ovl_writes, &zero);
	if (!w || w->tid != (__u32)bpf_get_current_pid_tgid() || w->ino != ino ||
	    bpf_ktime_get_ns() - w->ktime_ns > hive_burst_gap_ns)
		return mask;
	w->tid = 0; /* used once */
	/* With the inner check's own kinds: a note left by a write refused before the overlay looked
	 * at the layer (so never used) must not hide what the thread does next, an exec or a read. */
	return mask | w->mask;
}
