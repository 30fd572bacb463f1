/* The smallest program there is to exec, for the exec-heavy workload of the kernel
 * benchmark (bench/kernel.ts): no libc, no dynamic loader, one exit(0) system call. What
 * fork + exec + wait of it costs is then mostly the kernel's process creation and exec,
 * which is what the process trackers (bpf/process.bpf.h) add to. */
void _start(void)
{
	__asm__ volatile("mov $60, %eax\n\txor %edi, %edi\n\tsyscall");
	__builtin_unreachable();
}
