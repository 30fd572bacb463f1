# A Kubernetes node inside a stock-kernel QEMU guest (sourced by the guest's run.sh, cwd = the
# repository): containerd 2 with runc, the bridge CNI and a real kubelet that registers with the
# control plane on the host. Inputs (environment): HIVE_NODE_NAME, HIVE_NODE_DIR (on the host,
# read through the root share: kubeconfig, certificates), HIVE_CONTAINERD_BIN, HIVE_KUBELET,
# HIVE_IMAGES (archives to import, space-separated, the pod sandbox's first). It runs until /hive-out/stop appears.
set -eu
log() { printf 'node: %s %s\n' "$(date +%H:%M:%S)" "$*"; }

# The network: QEMU's user-mode stack, restricted to the ports the host forwards. 10.0.2.100:6443
# is the API server (through the host's fault proxy), 10.0.2.101:* the host's receivers.
modprobe virtio_net
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
for m in br_netfilter bridge veth nf_conntrack nf_nat nf_tables nft_chain_nat nft_compat \
  xt_MASQUERADE xt_nat xt_addrtype xt_comment xt_mark xt_conntrack overlay; do
  modprobe "$m" 2>/dev/null || log "module $m not loaded"
done
sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
# The kubernetes Service's address (what in-cluster clients are given) leads to the API server,
# as kube-proxy's rule would; no kube-proxy runs here.
for chain in PREROUTING OUTPUT; do
  iptables -t nat -A "$chain" -d 10.0.0.1/32 -p tcp --dport 443 -j DNAT --to-destination 10.0.2.100:6443
done

# Shared mount propagation, as systemd sets up: the agent's bpffs mount asks for HostToContainer.
mount --make-rshared /
# State on tmpfs: overlayfs snapshots cannot live on the guest's overlay root.
for d in /var/lib/containerd /var/lib/kubelet /var/lib/cni /var/log/pods /var/log/containers /run/containerd; do
  mkdir -p "$d"
  mount -t tmpfs tmpfs "$d"
done
mkdir -p /etc/containerd /etc/cni/net.d /opt/cni
cp "$HIVE_NODE_DIR/containerd.toml" /etc/containerd/config.toml
cp "$HIVE_NODE_DIR/cni.conflist" /etc/cni/net.d/10-hive.conflist

export PATH="$HIVE_CONTAINERD_BIN:$PATH"
log "starting containerd"
containerd --config /etc/containerd/config.toml > /hive-out/containerd.log 2>&1 &
containerd_pid=$!
for _ in $(seq 1 300); do [ -S /run/containerd/containerd.sock ] && break; sleep 0.2; done
# The pod sandbox image first: the kubelet needs it for any pod. The others import while the
# kubelet starts and registers (the host waits for /hive-out/imported before it deploys).
set -- $HIVE_IMAGES
log "importing $1"
ctr -n k8s.io images import "$1" > /dev/null
shift

log "starting kubelet"
"$HIVE_KUBELET" --config="$HIVE_NODE_DIR/kubelet.yaml" --kubeconfig="$HIVE_NODE_DIR/kubelet.kubeconfig" \
  --node-ip=10.0.2.15 --hostname-override="$HIVE_NODE_NAME" --v=1 > /hive-out/kubelet.log 2>&1 &
kubelet_pid=$!

for archive in "$@"; do
  log "importing $archive"
  ctr -n k8s.io images import "$archive" > /dev/null
done
log "images: $(ctr -n k8s.io images ls -q | tr '\n' ' ')"
echo done > /hive-out/imported
echo ready > /hive-out/started

# Commands from the host (node-guest.ts exec): cmd-N.sh in, cmd-N.out and cmd-N.rc back.
while [ ! -e /hive-out/stop ]; do
  for c in /hive-out/cmd-*.sh; do
    [ -e "$c" ] || continue
    sh "$c" > "${c%.sh}.out" 2>&1 && echo 0 > "${c%.sh}.rc.tmp" || echo $? > "${c%.sh}.rc.tmp"
    rm -f "$c"
    mv "${c%.sh}.rc.tmp" "${c%.sh}.rc"
  done
  sleep 1
done
log "stopping"
kill "$kubelet_pid" 2>/dev/null || true
wait "$kubelet_pid" 2>/dev/null || true
kill "$containerd_pid" 2>/dev/null || true
wait "$containerd_pid" 2>/dev/null || true
