/* SPDX-License-Identifier: GPL-2.0 */
/* The register file a kprobe program's context points to, per target architecture: the UAPI
 * layouts (asm/ptrace.h; stable), with the field names libbpf's bpf_tracing.h uses outside the
 * kernel. Defined here rather than included because the build host carries only its own
 * architecture's asm/ headers, and both objects are built from one source on one host
 * (bpf/build.sh). Context accesses must be constant offsets: no CO-RE on these. */
#ifndef HIVE_REGS_H
#define HIVE_REGS_H

#if defined(__TARGET_ARCH_x86)
/* x86-64: arguments in rdi, rsi, rdx, rcx, r8, r9. */
struct pt_regs {
	unsigned long r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8;
	unsigned long rax, rcx, rdx, rsi, rdi, orig_rax, rip, cs, eflags, rsp, ss;
};
#elif defined(__TARGET_ARCH_arm64)
/* arm64: arguments in x0..x7; the kernel's struct pt_regs begins with user_pt_regs, which
 * bpf_tracing.h casts the context to. */
struct user_pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
};
struct pt_regs;
#else
#error "build with -D__TARGET_ARCH_x86 or -D__TARGET_ARCH_arm64 (bpf/build.sh does)"
#endif

#endif /* HIVE_REGS_H */
