#!/bin/sh
# Builds bpf/hive.bpf.o (CO-RE, loaded unchanged on every kernel) when a source is newer.
set -eu
cd "$(dirname "$0")"
out=hive.bpf.o
# HIVE_BPF_VARIANT=program|layout|empty builds a variant to the path in HIVE_BPF_OUT, never the
# shipped object: for the upgrade tests (same layout other code, or another map layout), and the
# benchmark's floor (the trap hooks attached, returning at once).
variant=""
case "${HIVE_BPF_VARIANT:-}" in
program) variant=-DHIVE_PROGRAM_VARIANT ;;
layout) variant=-DHIVE_LAYOUT_VARIANT ;;
empty) variant=-DHIVE_EMPTY_VARIANT ;;
"") ;;
*) echo "hive-bpf: unknown HIVE_BPF_VARIANT ${HIVE_BPF_VARIANT}" >&2; exit 2 ;;
esac
if [ -n "$variant" ]; then out=${HIVE_BPF_OUT:?HIVE_BPF_OUT names the variant object}; fi
if [ -z "$variant" ] && [ -f "$out" ] && [ ! hive.bpf.c -nt "$out" ] && [ ! hive.h -nt "$out" ] && [ ! process.bpf.h -nt "$out" ] &&
  [ ! build.sh -nt "$out" ]; then
  exit 0
fi
# asm/ headers pulled in by linux/types.h live under the host's multiarch include dir.
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
clang -target bpf -g -O2 -Wall -Werror -D__TARGET_ARCH_x86 $variant \
  -I"/usr/include/$multiarch" -c hive.bpf.c -o "$out.tmp"
mv "$out.tmp" "$out"
printf 'hive-bpf: built %s\n' "$out" >&2
