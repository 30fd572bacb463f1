#!/bin/sh
# Hive's single set-up entry point: `npm test`, `npm run bench` and `npm run demo` come
# through here so that each works from a fresh clone. It installs the npm packages, the
# Debian packages Hive needs (when run as root; otherwise it names the exact command), the
# stock kernels the kernel suite boots, and then runs the task under Node 24.
set -eu
cd "$(dirname "$0")/.."
task=${1:?usage: bootstrap.sh test|test-arm64|bench|demo [args...]}
shift

log() { printf 'hive-setup: %s\n' "$*" >&2; }

# npm packages (Node 24 itself comes from the `node` package into node_modules/.bin).
if [ ! -x node_modules/.bin/vitest ] || [ ! -x node_modules/.bin/node ] ||
  [ package-lock.json -nt node_modules/.package-lock.json ]; then
  # `npm ci`: exactly the locked versions, node_modules made afresh. The lock records every
  # platform's build of the tools that ship one (biome is pinned to a version whose every
  # platform build the registry has), so it installs the same way on any machine.
  log "installing npm packages"
  npm ci --no-audit --no-fund --loglevel=error
fi
PATH="$PWD/node_modules/.bin:$PATH"
export PATH

# Debian packages: one list, read by this script and by the Dockerfile's checks.
missing=""
# test-arm64 also boots arm64 guests (qemu-system-aarch64); nothing else needs that package.
extra=""
if [ "$task" = test-arm64 ]; then extra=qemu-system-arm; fi
for pkg in $(grep -v '^#' scripts/debian-packages.txt) $extra; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then
    log "installing Debian packages:$missing"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
  else
    log "missing Debian packages; install them with: sudo apt-get install -y$missing"
  fi
fi

# Kernels for the QEMU suite and benchmark (6.12 from backports, 5.10 from bullseye; 6.1 is
# linux-image-amd64 above). The demo needs only 6.1; test-arm64 only bookworm's arm64 kernel.
case "$task" in
  demo) ;;
  test-arm64) sh test/kernel/fetch-kernels.sh arm64 ;;
  *) sh test/kernel/fetch-kernels.sh ;;
esac

# The compiled BPF object is a build product; rebuild it when its sources are newer.
if [ -f bpf/build.sh ]; then sh bpf/build.sh; fi

# The real Kubernetes control plane, node and Pulumi programs the tests run, built from their Go
# modules (test/cluster/go/) once per pinned version into a cache outside the repository
# ($HIVE_BIN_CACHE, default ~/.cache/hive/go-bin). Cold, this takes about half an hour on two cores.
case "$task" in
  # The README's Python program runs with the pinned Pulumi SDK from PyPI, in a virtual
  # environment made once per machine ($HIVE_PY_CACHE, default ~/.cache/hive/python).
  test) node test/cluster/build-binaries.ts && node test/cluster/python-env.ts ;;
  # The controllers benchmark runs its agents against the real control plane.
  bench) node test/cluster/build-binaries.ts etcd kubernetes ;;
  demo) case " $* " in *" --cluster "*) node test/cluster/build-binaries.ts ;; esac ;;
esac

case "$task" in
  test) exec vitest run "$@" ;;
  # The arm64 image on an arm64 kernel under qemu-system-aarch64 (test/arm64); its own config.
  test-arm64) exec vitest run --config vitest.arm64.config.ts "$@" ;;
  bench) exec node --expose-gc bench/main.ts "$@" ;;
  demo) exec node examples/demo/main.ts "$@" ;;
  *) log "unknown task $task"; exit 2 ;;
esac
