#!/bin/sh
# Builds bpf/hive.bpf.o (CO-RE, loaded unchanged on every kernel) when a source is newer.
set -eu
cd "$(dirname "$0")"
out=hive.bpf.o
if [ -f "$out" ] && [ ! hive.bpf.c -nt "$out" ] && [ ! hive.h -nt "$out" ] && [ ! process.bpf.h -nt "$out" ] &&
  [ ! build.sh -nt "$out" ]; then
  exit 0
fi
# asm/ headers pulled in by linux/types.h live under the host's multiarch include dir.
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
clang -target bpf -g -O2 -Wall -Werror -D__TARGET_ARCH_x86 \
  -I"/usr/include/$multiarch" -c hive.bpf.c -o "$out.tmp"
mv "$out.tmp" "$out"
printf 'hive-bpf: built bpf/%s\n' "$out" >&2
