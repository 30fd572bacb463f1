import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseAgentConfig } from "../runtime/agent/config.ts";
import type { HiveMonitorValues } from "./args.ts";
import { agentArgs, daemonSetManifest } from "./builders/daemonset.ts";
import { formatProblems } from "./builders/problems.ts";
import { resolveConfig } from "./config.ts";

const image = "registry.example.com/hive:0.1.0";

function problems(args: unknown): string {
  const result = resolveConfig(args as HiveMonitorValues);
  return result.ok ? "" : formatProblems(result.problems);
}

describe("resolveConfig", () => {
  it("fills every default for the minimal configuration", () => {
    const result = resolveConfig({ image });
    expect(result).toEqual({
      ok: true,
      config: {
        namespace: "hive-system",
        createNamespace: true,
        image,
        imagePullPolicy: "IfNotPresent",
        imagePullSecrets: [],
        callback: undefined,
        tenantCallbacks: [],
        policies: [],
        nodeSelector: {},
        tolerations: [{ operator: "Exists" }],
        affinity: undefined,
        resources: { requests: { cpu: "50m", memory: "144Mi" }, limits: { memory: "512Mi" } },
        podLabels: {},
        podAnnotations: {},
        updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } },
        priorityClassName: "system-node-critical",
        priorityClassQuota: true,
        logLevel: "info",
        metricsPort: 9464,
        runtimeSocket: "/run/containerd/containerd.sock",
        spoolDir: "/var/lib/hive/spool",
        containerdRoot: "/var/lib/containerd",
        legacyKernelCapabilities: false,
        sharedKernels: false,
        admissionPolicy: true,
        podMonitor: undefined,
        prometheusRule: undefined,
        grafanaDashboard: undefined,
        reports: { format: "policyreport" },
        deleteCrdsOnDestroy: false,
      },
    });
  });

  it("lets nodeSelector narrow the agent to one architecture it is built for", () => {
    for (const arch of ["amd64", "arm64"]) {
      const result = resolveConfig({ image, nodeSelector: { "kubernetes.io/arch": arch } });
      expect(result.ok && result.config.nodeSelector).toEqual({ "kubernetes.io/arch": arch });
    }
  });

  it("takes a callback URL alone as short for { url }", () => {
    const result = resolveConfig({ image, callback: "https://alerts.example.com/hive" });
    expect(result.ok && result.config.callback).toEqual({ url: "https://alerts.example.com/hive" });
  });

  it("keeps the scheduling options it is given, as the pod spec spells them", () => {
    const affinity = {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchExpressions: [{ key: "pool", operator: "In", values: ["apps"] }] }],
        },
      },
    };
    const result = resolveConfig({
      image,
      affinity,
      podLabels: { team: "security" },
      podAnnotations: { "example.com/owner": "security team" },
      updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: "10%" } },
      podMonitor: true,
      deleteCrdsOnDestroy: true,
    });
    if (!result.ok) throw new Error(formatProblems(result.problems));
    expect(result.config).toMatchObject({
      affinity,
      podLabels: { team: "security" },
      podAnnotations: { "example.com/owner": "security team" },
      updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: "10%" } },
      podMonitor: {},
      deleteCrdsOnDestroy: true,
    });
  });

  it("maps a trap's severity and labels onto the HivePolicy, and passes clusterName and callback.format to the agent", () => {
    const result = resolveConfig({
      image,
      clusterName: "prod-eu-1",
      callback: { url: "http://alertmanager.monitoring:9093", format: "alertmanager" },
      traps: [
        { path: "/etc/shadow", severity: "critical", labels: { team: "payments", "example.com/tier": "1" } },
      ],
    });
    if (!result.ok) throw new Error(formatProblems(result.problems));
    expect(result.config.policies[0]?.spec.traps[0]).toEqual({
      path: "/etc/shadow",
      severity: "critical",
      labels: { team: "payments", "example.com/tier": "1" },
    });
    const args = agentArgs(result.config);
    expect(args.join(" ")).toContain("--cluster-name prod-eu-1");
    expect(args.join(" ")).toContain("--callback-format alertmanager");
    // The agent reads them back from those arguments.
    expect(
      parseAgentConfig(args.slice(1), { NODE_NAME: "n", HIVE_CALLBACK: "http://am:9093" }),
    ).toMatchObject({
      clusterName: "prod-eu-1",
      callbackFormat: "alertmanager",
    });
    // Hive's own JSON is the default: no flag.
    const plain = resolveConfig({ image, callback: { url: "https://x.example/" } });
    expect(plain.ok && agentArgs(plain.config).join(" ")).not.toContain("--callback-format");
  });

  it("keeps each node's kernel its own unless sharedKernels says nodes share them, which the agent reads back", () => {
    const args = (extra: object) => {
      const r = resolveConfig({ image, ...extra });
      if (!r.ok) throw new Error(formatProblems(r.problems));
      return parseAgentConfig(agentArgs(r.config).slice(1), { NODE_NAME: "n" });
    };
    expect(args({}).sharedKernels).toBe(false);
    expect(args({ sharedKernels: true }).sharedKernels).toBe(true);
    const bad = resolveConfig({ image, sharedKernels: "yes" as unknown as boolean });
    expect(!bad.ok && formatProblems(bad.problems)).toContain("sharedKernels: must be true or false");
  });

  it("arms traps in the image layers by default, with flags the agent reads back; imageLayers: false mounts neither", () => {
    const on = resolveConfig({ image, containerdRoot: "/var/lib/rancher/k3s/agent/containerd" });
    if (!on.ok) throw new Error(formatProblems(on.problems));
    expect(parseAgentConfig(agentArgs(on.config).slice(1), { NODE_NAME: "n" })).toMatchObject({
      imageLayers: "/host/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots",
      cgroupRoot: "/host/sys/fs/cgroup",
    });
    // k3s with its root named, and CRI-O without image layers: both render.
    const k3s = resolveConfig({
      image,
      runtimeSocket: "/run/k3s/containerd/containerd.sock",
      containerdRoot: "/var/lib/rancher/k3s/agent/containerd",
    });
    if (!k3s.ok) throw new Error(formatProblems(k3s.problems));
    const k3sVolumes = (
      daemonSetManifest(k3s.config).spec as {
        template: { spec: { volumes: { name: string; hostPath?: { path: string } }[] } };
      }
    ).template.spec.volumes;
    expect(k3sVolumes.find((v) => v.name === "containerd-root")?.hostPath?.path).toBe(
      "/var/lib/rancher/k3s/agent/containerd",
    );
    expect(k3sVolumes.find((v) => v.name === "container-runtime")?.hostPath?.path).toBe(
      "/run/k3s/containerd",
    );
    expect(resolveConfig({ image, runtimeSocket: "/run/crio/crio.sock", imageLayers: false }).ok).toBe(true);
    const off = resolveConfig({ image, imageLayers: false });
    if (!off.ok) throw new Error(formatProblems(off.problems));
    expect(off.config.containerdRoot).toBeUndefined();
    expect(agentArgs(off.config).join(" ")).not.toContain("--image-layers");
    const volumes = (
      daemonSetManifest(off.config).spec as { template: { spec: { volumes: { name: string }[] } } }
    ).template.spec.volumes;
    expect(volumes.map((v) => v.name)).not.toContain("containerd-root");
    expect(volumes.map((v) => v.name)).not.toContain("cgroup");
  });

  it("groups traps into one policy per name, keeping their order", () => {
    const result = resolveConfig({
      image,
      traps: [{ path: "/a" }, { path: "/b", policy: "other" }, { path: "/c" }],
    });
    expect(result.ok && result.config.policies).toEqual([
      { name: "default", spec: { traps: [{ path: "/a" }, { path: "/c" }] } },
      { name: "other", spec: { traps: [{ path: "/b" }] } },
    ]);
  });

  it.each([
    [
      { image: "has space" },
      'image: is required: the agent image built from Hive\'s Dockerfile, e.g. "registry.example.com/hive:0.1.0"',
    ],
    [
      { image, imagePullPolicy: "Sometimes" },
      'imagePullPolicy: "Sometimes" is not one of Always, IfNotPresent, Never',
    ],
    [{ image, imagePullSecrets: ["Bad_Name"] }, 'imagePullSecrets[0]: "Bad_Name" is not a Secret name'],
    [
      { image, namespace: { existing: "x", create: true } },
      "namespace.create: is not a known option (known: existing)",
    ],
    [
      { image, namespace: 7 },
      'namespace: must be a name to create ("hive-system") or { existing: "name" } to use one that exists',
    ],
    [
      { image, callback: { url: "ftp://x" } },
      'callback.url: "ftp://x" must be an http:// or https:// URL (or give urlSecret: { name, key })',
    ],
    [
      { image, callback: { url: "https://x", urlSecret: { name: "s", key: "k" } } },
      "callback.urlSecret: goes instead of callback.url: give one of them",
    ],
    [
      { image, callback: { urlSecret: { name: "s" } } },
      "callback.urlSecret.key: undefined is not a key of a Secret (letters, digits, - _ .)",
    ],
    [
      { image, callback: { url: "https://x", headersSecret: "hive-agent-callback" } },
      'callback.headersSecret: "hive-agent-callback" is the Secret the monitor writes for callback.url; name another',
    ],
    [
      { image, callback: { url: "https://x", signingSecret: { name: "s" } } },
      "callback.signingSecret.key: undefined is not a key of a Secret (letters, digits, - _ .)",
    ],
    [
      { image, callback: { url: "https://x", headers: { a: "b" } } },
      "callback.headers: is not a known option (known: url, urlSecret, headersSecret, signingSecret, format)",
    ],
    [
      { image, callback: { url: "https://x.example/", format: "xml" } },
      'callback.format: "xml" is not one of json, cloudevents, alertmanager, slack',
    ],
    [
      { image, clusterName: "prod eu" },
      'clusterName: "prod eu" must be letters, digits, "-", "_" and "." (at most 63), e.g. "prod-eu-1"',
    ],
    [
      { image, traps: [{ path: "/etc/shadow", severity: "high" }] },
      "traps[0].severity: must be one of info, warning, critical",
    ],
    [
      { image, traps: [{ path: "/etc/shadow", labels: { team: "-bad-" } }] },
      "traps[0].labels.team: must be a label value: at most 63 letters, digits, - _ . (beginning and ending with a letter or digit)",
    ],
    [
      { image, traps: [{ path: "/etc/shadow", labels: { "-team": "ok" } }] },
      "traps[0].labels.-team: is not a label name (such as team or example.com/team)",
    ],
    [
      { image, traps: [{ path: "/etc/shadow", labels: "team" }] },
      'traps[0].labels: must map label names to values, e.g. { team: "payments" }',
    ],
    [
      {
        image,
        traps: [
          {
            path: "/etc/shadow",
            labels: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, "v"])),
          },
        ],
      },
      "traps[0].labels: must map label names to label values, at most 32 of them",
    ],
    [
      { image, tenantCallbacks: ["https://teams.example.com/it's"] },
      `tenantCallbacks[0]: "https://teams.example.com/it's" must be an http:// or https:// URL written as URL parsing writes it (lowercase host, no default port, no userinfo, no dot segments or encoded dots, slashes or quotes)`,
    ],
    [
      { image, tenantCallbacks: ["https://teams.example.com/a?team=b"] },
      `tenantCallbacks[0]: "https://teams.example.com/a?team=b" must end in a path: no query or fragment`,
    ],
    [
      { image, tenantCallbacks: "https://x" },
      'tenantCallbacks: must be a list of URL prefixes such as ["https://alerts.example.com/teams/"]',
    ],
    [{ image, traps: { path: "/x" } }, 'traps: must be a list of traps such as [{ path: "/etc/shadow" }]'],
    [
      { image, traps: [{ path: "/x", policy: "Not A Name" }] },
      'traps[0].policy: "Not A Name" is not a HivePolicy name (a DNS subdomain)',
    ],
    [
      { image, traps: [{ path: "/x", mode: 0o10000, create: true }] },
      'traps[0].mode: 4096 is not permission bits; write an octal literal such as 0o444 or a string such as "0444"',
    ],
    [
      { image, traps: [{ path: "/x", mode: "0999", create: true }] },
      'traps[0].mode: must be an octal permission mode such as 444 or "0644"',
    ],
    [{ image, traps: [{ path: "/x/../etc/shadow" }] }, "traps[0].path: must not contain '..' components"],
    [
      { image, traps: [{ path: "/x", mode: 0o4755, create: true }] },
      "traps[0].mode: must not set setuid, setgid, sticky or world-writable bits; use a mode such as 0644 or 0444",
    ],
    [
      { image, traps: [{ path: "/x", mode: "0666", create: true }] },
      "traps[0].mode: must not set setuid, setgid, sticky or world-writable bits; use a mode such as 0644 or 0444",
    ],
    [
      { image, traps: [{ path: "/x", match: { containerName: /(a)\1/ } }] },
      "traps[0].match.containerName: must be a regular expression RE2 accepts (no backreferences or lookaround) of bounded size",
    ],
    [
      { image, traps: [{ path: "/x", match: { containerName: "(?<=sidecar-)db" } }] },
      "traps[0].match.containerName: must be a regular expression RE2 accepts (no backreferences or lookaround) of bounded size",
    ],
    [{ image, traps: [{ path: "/x", accesses: ["peek"] }] }, "traps[0].accesses[0]: "],
    [
      { image, traps: [{ path: "/x", match: { labels: { a: "b" } } }] },
      "traps[0].match.labels: is not a known option (known: pod, namespace, ip, containerName, matchLabels)",
    ],
    [
      { image, nodeSelector: { "bad key!": "x" } },
      "nodeSelector.bad key!: the key is not a valid label name",
    ],
    [
      { image, nodeSelector: { "kubernetes.io/arch": "s390x" } },
      "nodeSelector.kubernetes.io/arch: the agent runs only where kubernetes.io/arch is amd64 or arm64",
    ],
    [
      { image, nodeSelector: { "kubernetes.io/os": "windows" } },
      "nodeSelector.kubernetes.io/os: the agent runs only where kubernetes.io/os is linux",
    ],
    [
      { image, tolerations: [{ operator: "Exists", value: "x" }] },
      'tolerations[0].value: must be empty with operator "Exists"',
    ],
    [
      { image, tolerations: [{ effect: "Sometimes" }] },
      'tolerations[0].effect: "Sometimes" is not one of NoSchedule, PreferNoSchedule, NoExecute',
    ],
    [
      { image, resources: { limits: { memory: 512 } } },
      'resources.limits.memory: 512 is not a quantity such as "100m" or "256Mi" (write it as a string)',
    ],
    [{ image, logLevel: "trace" }, 'logLevel: "trace" is not one of debug, info, warn, error'],
    [{ image, metricsPort: 8080.5 }, "metricsPort: 8080.5 must be a port number from 1 to 65535"],
    [
      { image, runtimeSocket: "run/containerd.sock" },
      'runtimeSocket: "run/containerd.sock" must be an absolute host path (not "/", no ".." components)',
    ],
    [{ image, spoolDir: "/" }, 'spoolDir: "/" must be an absolute host path (not "/", no ".." components)'],
    [
      { image, containerdRoot: "var/lib/containerd" },
      'containerdRoot: "var/lib/containerd" must be an absolute host path (not "/", no ".." components)',
    ],
    // Image layers on a runtime whose containerd root is elsewhere: refused before the rollout,
    // which would otherwise leave the node without an agent (its hostPath does not exist).
    [
      { image, runtimeSocket: "/run/k3s/containerd/containerd.sock" },
      "containerdRoot: the runtime socket is k3s's or RKE2's, whose containerd root is not /var/lib/containerd (the agent's pod would never start): set containerdRoot to /var/lib/rancher/k3s/agent/containerd (k3s) or /var/lib/rancher/rke2/agent/containerd (RKE2), or imageLayers: false",
    ],
    [
      { image, runtimeSocket: "/var/run/crio/crio.sock" },
      "imageLayers: the runtime socket is CRI-O's, which keeps no containerd snapshots: set imageLayers: false (traps are then armed once each container runs)",
    ],
    [{ image, legacyKernelCapabilities: "yes" }, "legacyKernelCapabilities: must be true or false"],
    [{ image, admissionPolicy: "off" }, "admissionPolicy: must be true or false"],
    [
      { image, callback: "alerts.example.com" },
      'callback: "alerts.example.com" must be an http:// or https:// URL',
    ],
    [
      { image, affinity: { nodeAffinity: {}, antiAffinity: {} } },
      "affinity.antiAffinity: is not a known option",
    ],
    [
      { image, podLabels: { "app.kubernetes.io/component": "x" } },
      "podLabels.app.kubernetes.io/component: is set by Hive (the DaemonSet selects its pods by it); use another key",
    ],
    [{ image, podLabels: { team: "Sec Ops" } }, 'podLabels.team: "Sec Ops" is not a valid label value'],
    [{ image, podAnnotations: { "example.com/x": 1 } }, "podAnnotations.example.com/x: 1 must be a string"],
    [
      { image, updateStrategy: { type: "Recreate" } },
      'updateStrategy.type: "Recreate" is not one of RollingUpdate, OnDelete',
    ],
    [
      { image, updateStrategy: { type: "OnDelete", rollingUpdate: { maxUnavailable: 2 } } },
      'updateStrategy.rollingUpdate: only applies with type "RollingUpdate"',
    ],
    [
      { image, updateStrategy: { rollingUpdate: { maxUnavailable: "ten" } } },
      'updateStrategy.rollingUpdate.maxUnavailable: "ten" must be a number of pods or a percentage such as "10%"',
    ],
    [
      { image, podMonitor: { interval: "often" } },
      'podMonitor.interval: "often" must be a duration such as "30s" or "1m"',
    ],
    [
      { image, podMonitor: "yes" },
      'podMonitor: must be true or { interval?: "30s", labels?: { release: "prometheus" } }',
    ],
    [{ image, deleteCrdsOnDestroy: "yes" }, "deleteCrdsOnDestroy: must be true or false"],
    [{ image, priorityClassQuota: "yes" }, "priorityClassQuota: must be true or false"],
    [
      { image, prometheusRule: "yes" },
      'prometheusRule: must be true or { labels?: { release: "prometheus" } }',
    ],
    [
      { image, prometheusRule: { labels: { "bad key!": "x" } } },
      "prometheusRule.labels.bad key!: the key is not a valid label name",
    ],
    [
      { image, prometheusRule: { interval: "1m" } },
      "prometheusRule.interval: is not a known option (known: labels)",
    ],
    [
      { image, grafanaDashboard: 1 },
      'grafanaDashboard: must be true or { namespace?: "monitoring", labels?: { grafana_dashboard: "1" } }',
    ],
    [
      { image, grafanaDashboard: { namespace: "Monitoring" } },
      'grafanaDashboard.namespace: "Monitoring" is not a namespace name',
    ],
    [
      { image, reports: "policyreports" },
      'reports: "policyreports" must be "policyreport", "openreports" or "none"',
    ],
    [
      { image, reports: { format: "falco" } },
      'reports.format: "falco" must be "policyreport", "openreports" or "none"',
    ],
    [
      { image, reports: { failWindowHours: 0 } },
      "reports.failWindowHours: must be a whole number of hours from 1 to 8760 (a year), e.g. 168",
    ],
    [
      { image, reports: { installCrds: true } },
      "reports.installCrds: is not a known option (known: format, installCrd, failWindowHours)",
    ],
  ])("names the option and the fix for %j", (args, expected) => {
    expect(problems(args)).toContain(expected);
  });

  it("never throws, whatever it is given", () => {
    fc.assert(
      fc.property(fc.anything(), fc.anything(), (traps, rest) => {
        const args = { image, traps, ...(typeof rest === "object" && rest !== null ? rest : {}) };
        const result = resolveConfig(args as HiveMonitorValues);
        expect(typeof result.ok).toBe("boolean");
      }),
      { numRuns: 300 },
    );
  });
});

describe("the agent's priority", () => {
  it("is admitted by a ResourceQuota outside kube-system unless priorityClassQuota is false or no class is set", () => {
    const quota = (args: Partial<HiveMonitorValues>) => {
      const r = resolveConfig({ image, ...args });
      if (!r.ok) throw new Error(JSON.stringify(r.problems));
      return r.config.priorityClassQuota;
    };
    expect(quota({})).toBe(true);
    expect(quota({ namespace: { existing: "security" } })).toBe(true);
    expect(quota({ namespace: { existing: "kube-system" } })).toBe(false);
    expect(quota({ priorityClassName: "" })).toBe(false);
    expect(quota({ priorityClassQuota: false })).toBe(false);
  });

  it("is system-node-critical unless set; an empty string leaves the cluster's default", () => {
    const of = (priorityClassName?: string) => {
      const r = resolveConfig({ image, ...(priorityClassName === undefined ? {} : { priorityClassName }) });
      if (!r.ok) throw new Error(JSON.stringify(r.problems));
      return r.config.priorityClassName;
    };
    expect(of()).toBe("system-node-critical");
    expect(of("")).toBeUndefined();
    expect(of("hive-agent")).toBe("hive-agent");
  });
});
