#!/bin/sh
# Fetches the stock Debian kernels the kernel suite boots besides the host's 6.1
# (linux-image-amd64 from bookworm): 6.12 from bookworm-backports and 5.10 from bullseye.
# Together they cover the three inode_permission signatures. Each kernel is unpacked with
# `dpkg -x` into $HIVE_KERNEL_CACHE/<series>/ and its module index is built on the host
# (depmod inside an emulated guest takes minutes). Idempotent: a kernel already unpacked
# and indexed is skipped without touching the network.
set -eu
cache=${HIVE_KERNEL_CACHE:-/var/cache/hive-kernels}
series_list="6.12:bookworm-backports 5.10:bullseye"

log() { printf 'hive-kernels: %s\n' "$*" >&2; }

# `fetch-kernels.sh arm64` (npm run test:arm64): bookworm's linux-image-arm64 (6.1) and the arm64
# busybox-static for its initramfs, into $HIVE_KERNEL_CACHE/arm64-6.1/. mmdebstrap only
# extracts the packages: no arm64 binary runs, and this machine's dpkg gains no architecture.
if [ "${1:-}" = arm64 ]; then
  dir=$cache/arm64-6.1
  for dep in "$dir"/lib/modules/*/modules.dep; do
    [ -f "$dep" ] && [ -x "$dir/bin/busybox" ] && exit 0
  done
  [ "$(id -u)" = 0 ] || { log "the arm64 kernel is missing; run as root: sudo sh test/kernel/fetch-kernels.sh arm64"; exit 1; }
  command -v mmdebstrap >/dev/null || { log "mmdebstrap is missing (apt-get install mmdebstrap)"; exit 1; }
  mirror=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n1)
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
  log "fetching linux-image-arm64 and busybox-static (arm64) from bookworm at $mirror"
  rm -rf "$dir.partial"
  mmdebstrap --quiet --arch=arm64 --variant=extract --mode=root --format=directory \
    --include=linux-image-arm64,busybox-static bookworm "$dir.partial" \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main"
  version=$(ls "$dir.partial/lib/modules" | head -n1)
  depmod -b "$dir.partial" "$version"
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
  log "arm64 kernel $version ready in $dir"
  exit 0
fi

ready() { # series -> 0 when unpacked and indexed
  for dep in "$cache/$1"/lib/modules/*/modules.dep; do
    [ -f "$dep" ] && ls "$cache/$1"/boot/vmlinuz-* >/dev/null 2>&1 && return 0
  done
  return 1
}

todo=""
for item in $series_list; do
  ready "${item%%:*}" || todo="$todo $item"
done
[ -z "$todo" ] && exit 0

if [ "$(id -u)" != 0 ]; then
  log "kernels missing for:$todo (the kernel suite skips them locally and fails under CI=true)."
  log "run as root:  sudo sh test/kernel/fetch-kernels.sh   which does:"
  log "  add apt sources for bookworm-backports and bullseye (pinned so they never upgrade the host)"
  log "  apt-get update; apt-get download linux-image-<version>-amd64 from each suite"
  log "  dpkg -x <deb> $cache/<series>; depmod -b $cache/<series> <version>"
  exit 0
fi

# Extra suites, pinned to priority 1: only downloaded explicitly, never installed by accident.
# They come from the Debian mirror this machine already uses (the first URI of its sources).
sources=/etc/apt/sources.list.d/hive-kernels.sources
if [ ! -f "$sources" ]; then
  mirror=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n1)
  [ -n "$mirror" ] || mirror=$(sed -n 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\).*/\2/p' /etc/apt/sources.list 2>/dev/null | grep -v security | head -n1)
  [ -n "$mirror" ] || { log "no Debian mirror found in this machine's apt sources"; exit 1; }
  log "adding apt sources for bookworm-backports and bullseye from $mirror"
  cat >"$sources" <<SRC
Types: deb
URIs: $mirror
Suites: bookworm-backports bullseye
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  cat >/etc/apt/preferences.d/hive-kernels <<'PIN'
Package: *
Pin: release n=bullseye
Pin-Priority: 1

Package: *
Pin: release n=bookworm-backports
Pin-Priority: 1
PIN
  apt-get update -qq -o Dir::Etc::sourcelist=/dev/null -o Dir::Etc::sourceparts=/etc/apt/sources.list.d >/dev/null
fi

work=$(mktemp -d)
chmod 755 "$work" # apt downloads as the _apt user
trap 'rm -rf "$work"' EXIT
for item in $todo; do
  series=${item%%:*}
  suite=${item#*:}
  # The metapackage's first dependency names the versioned kernel image package.
  image=$(apt-cache show "linux-image-amd64/$suite" 2>/dev/null | sed -n 's/^Depends: \(linux-image-[^ ,]*\).*/\1/p' | head -n1)
  if [ -z "$image" ]; then
    apt-get update -qq >/dev/null
    image=$(apt-cache show "linux-image-amd64/$suite" | sed -n 's/^Depends: \(linux-image-[^ ,]*\).*/\1/p' | head -n1)
  fi
  [ -n "$image" ] || { log "cannot find linux-image-amd64 in $suite"; exit 1; }
  log "fetching $image from $suite"
  (cd "$work" && apt-get download -qq "$image/$suite")
  rm -rf "$cache/$series"
  mkdir -p "$cache/$series"
  dpkg -x "$work/${image}"_*.deb "$cache/$series"
  # Newer packages ship under usr/lib; the guest and depmod expect lib/modules.
  if [ ! -d "$cache/$series/lib/modules" ] && [ -d "$cache/$series/usr/lib/modules" ]; then
    ln -s usr/lib "$cache/$series/lib"
  fi
  version=$(ls "$cache/$series/lib/modules" | head -n1)
  depmod -b "$cache/$series" "$version"
  rm -f "$work"/*.deb
  log "kernel $version ready in $cache/$series"
done
