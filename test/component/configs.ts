/** The configurations the component tests exercise: the least a user must write, and every option. */
import type { HiveMonitorArgs } from "../../component/index.ts";

export const MINIMAL: HiveMonitorArgs = { image: "registry.example.com/hive:0.1.0" };

export const FULL: HiveMonitorArgs = {
  namespace: { existing: "security" },
  image: "registry.example.com/hive@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
  imagePullPolicy: "Always",
  imagePullSecrets: ["registry-creds"],
  callback: {
    url: "https://alerts.example.com/hive",
    headersSecret: "hive-callback-headers",
    signingSecret: { name: "hive-callback-signing", key: "hmac-key" },
  },
  traps: [
    { path: "/etc/shadow", match: { matchLabels: { security: "high" } } },
    {
      path: "/etc/passwd",
      accesses: ["write", "append"],
      callback: "http://receiver.monitoring.svc:8080/alerts",
      match: { namespace: "payments", containerName: /api-.*/ },
    },
    {
      policy: "canaries",
      path: "/srv/canary/credentials.json",
      create: true,
      mode: 0o440,
      match: { pod: "ledger-0", ip: "10.0.3.7", containerName: "ledger|ledger-sidecar" },
    },
  ],
  nodeSelector: { "hive.example.com/monitored": "true" },
  tolerations: [{ operator: "Exists" }],
  resources: { requests: { cpu: "100m", memory: "192Mi" }, limits: { cpu: "1", memory: "1Gi" } },
  priorityClassName: "system-node-critical",
  logLevel: "debug",
  metricsPort: 9100,
  runtimeSocket: "/run/k3s/containerd/containerd.sock",
  spoolDir: "/var/lib/hive-alerts",
  containerdRoot: "/var/lib/rancher/k3s/agent/containerd",
  legacyKernelCapabilities: true,
};
