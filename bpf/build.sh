#!/bin/sh
# Builds the CO-RE objects, one per architecture from the one source, when a source is newer:
#   bpf/hive.bpf.o        x86-64 (amd64)
#   bpf/hive.arm64.bpf.o  arm64
# Each loads unchanged on every kernel of its architecture; they differ only in how a kprobe
# reads its argument registers (regs.h). runtime/kernel/architecture.ts names them.
set -eu
cd "$(dirname "$0")"
# HIVE_BPF_VARIANT=program|layout|empty builds a variant to the path in HIVE_BPF_OUT, never a
# shipped object: for the upgrade tests (same layout other code, or another map layout), and the
# benchmark's floor (the trap hooks attached, returning at once). HIVE_BPF_ARCH=x86|arm64 picks
# the variant's architecture (default x86).
variant=""
case "${HIVE_BPF_VARIANT:-}" in
program) variant=-DHIVE_PROGRAM_VARIANT ;;
layout) variant=-DHIVE_LAYOUT_VARIANT ;;
empty) variant=-DHIVE_EMPTY_VARIANT ;;
"") ;;
*) echo "hive-bpf: unknown HIVE_BPF_VARIANT ${HIVE_BPF_VARIANT}" >&2; exit 2 ;;
esac
# asm/ headers pulled in by linux/types.h live under the host's multiarch include dir; they are
# the same for both targets (asm-generic integer types), and no register layout comes from them.
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)

build() { # arch out
  clang -target bpf -g -O2 -Wall -Werror "-D__TARGET_ARCH_$1" $variant \
    -I"/usr/include/$multiarch" -c hive.bpf.c -o "$2.tmp"
  mv "$2.tmp" "$2"
  printf 'hive-bpf: built %s (%s)\n' "$2" "$1" >&2
}

if [ -n "$variant" ]; then
  build "${HIVE_BPF_ARCH:-x86}" "${HIVE_BPF_OUT:?HIVE_BPF_OUT names the variant object}"
  exit 0
fi
for target in x86:hive.bpf.o arm64:hive.arm64.bpf.o; do
  out=${target#*:}
  if [ -f "$out" ]; then
    stale=""
    for src in hive.bpf.c ./*.bpf.h hive.h regs.h build.sh; do
      [ "$src" -nt "$out" ] && stale=1
    done
    [ -z "$stale" ] && continue
  fi
  build "${target%%:*}" "$out"
done
