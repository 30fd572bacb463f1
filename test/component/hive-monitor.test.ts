/**
 * HiveMonitor under pulumi.runtime.setMocks: the resources a minimal and a full
 * configuration create, with the fields that decide what the agent may do.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import { LABEL_NODE, validatePolicySpec } from "../../api/index.ts";
import { ADMISSION_POLICY_NAME } from "../../component/builders/admission.ts";
import { type AllowArgs, HiveMonitor, type HiveMonitorArgs, HivePolicy } from "../../component/index.ts";
import { WATCH_TABLE_DIR } from "../../runtime/standalone/watch-table-file.ts";
import { FULL, MINIMAL } from "./configs.ts";
import {
  installMocks,
  isSecretWrapper,
  kubernetesObjects,
  type RecordedResource,
  resolve,
  settle,
} from "./pulumi-mocks.ts";

const recorded = installMocks();

interface Run {
  resources: RecordedResource[];
  outputs: { namespace: string; daemonSetName: string; policyNames: string[] };
}

async function run(name: string, args: HiveMonitorArgs): Promise<Run> {
  const monitor = new HiveMonitor(name, args);
  const outputs = {
    namespace: await resolve(monitor.namespace),
    daemonSetName: await resolve(monitor.daemonSetName),
    policyNames: await resolve(monitor.policyNames),
  };
  await settle(recorded);
  // Children are named after the monitor; keep this run's only.
  const resources = recorded.filter((r) => r.name === name || r.name.startsWith(`${name}-`));
  return { resources, outputs };
}

// biome-ignore lint/suspicious/noExplicitAny: walking arbitrary inputs
function find(resources: RecordedResource[], type: string): any {
  const found = resources.filter((r) => r.type === type);
  expect(found, `exactly one ${type}`).toHaveLength(1);
  return found[0]?.inputs;
}

/** The one object of `type` whose metadata.name is `objectName`. */
// biome-ignore lint/suspicious/noExplicitAny: walking arbitrary inputs
function findNamed(resources: RecordedResource[], type: string, objectName: string): any {
  const found = resources.filter((r) => r.type === type && r.inputs?.metadata?.name === objectName);
  expect(found, `exactly one ${type} named ${objectName}`).toHaveLength(1);
  return found[0]?.inputs;
}

/** Every value under `value`, with its path, to search for forbidden settings anywhere. */
function* walk(value: unknown, path = ""): Generator<[string, unknown]> {
  yield [path, value];
  if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) yield* walk(v, `${path}.${k}`);
  }
}

/** verbs per "group/resource", from a list of PolicyRules. */
// biome-ignore lint/suspicious/noExplicitAny: rules from inputs
function verbsByResource(rules: any[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const rule of rules) {
    for (const group of rule.apiGroups) {
      for (const resource of rule.resources) {
        const key = `${group || "core"}/${resource}${rule.resourceNames ? `[${rule.resourceNames.join(",")}]` : ""}`;
        out[key] = [...(out[key] ?? []), ...rule.verbs].sort();
      }
    }
  }
  return out;
}

const BASE_CAPABILITIES = [
  "BPF",
  "CHOWN",
  "DAC_READ_SEARCH",
  "FOWNER",
  "PERFMON",
  "SYS_PTRACE",
  "SYS_RESOURCE",
];

describe("HiveMonitor with the minimal configuration", () => {
  let result: Run;
  beforeAll(async () => {
    result = await run("mini", MINIMAL);
  });

  it("registers the component under its type token with every child it owns", () => {
    const types = result.resources.map((r) => r.type).sort();
    expect(types).toEqual(
      [
        "hive:index:HiveMonitor",
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
        "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition",
        "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition",
        "kubernetes:apps/v1:DaemonSet",
        "kubernetes:core/v1:Namespace",
        "kubernetes:core/v1:ResourceQuota",
        "kubernetes:core/v1:ServiceAccount",
        "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
        "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
        "kubernetes:rbac.authorization.k8s.io/v1:Role",
        "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
      ].sort(),
    );
  });

  it("outputs the namespace it created, the DaemonSet's name and no policies", () => {
    expect(result.outputs).toEqual({
      namespace: "hive-system",
      daemonSetName: "hive-agent",
      policyNames: [],
    });
    const ns = find(result.resources, "kubernetes:core/v1:Namespace");
    expect(ns.metadata.name).toBe("hive-system");
    // hostPID, hostPath and added capabilities are only admitted at the privileged level.
    expect(ns.metadata.labels["pod-security.kubernetes.io/enforce"]).toBe("privileged");
  });

  it("creates both CRDs from the one schema definition", () => {
    const crds = result.resources.filter((r) => r.type.endsWith(":CustomResourceDefinition"));
    expect(crds.map((c) => c.inputs.metadata.name).sort()).toEqual([
      "hivedata.hive-operator.com",
      "hivepolicies.hive-operator.com",
    ]);
  });

  it("runs the agent with hostPID and exactly the capabilities it needs, never privileged", () => {
    const ds = find(result.resources, "kubernetes:apps/v1:DaemonSet");
    const pod = ds.spec.template.spec;
    expect(pod.hostPID).toBe(true);
    expect(pod.hostNetwork).toBeUndefined();
    expect(pod.serviceAccountName).toBe("hive-agent");
    expect(pod.containers).toHaveLength(1);
    const sc = pod.containers[0].securityContext;
    expect(sc.capabilities.drop).toEqual(["ALL"]);
    expect([...sc.capabilities.add].sort()).toEqual(BASE_CAPABILITIES);
    expect(sc.privileged).toBe(false);
    expect(sc.allowPrivilegeEscalation).toBe(false);
    expect(sc.readOnlyRootFilesystem).toBe(true);
    expect(pod.securityContext.seccompProfile).toEqual({ type: "RuntimeDefault" });
    for (const [path, value] of walk(ds)) {
      if (path.endsWith(".privileged")) expect(value, path).toBe(false);
    }
  });

  it("mounts the BPF filesystem, BTF, securityfs, the runtime socket's directory, the spool, the watch tables, and read-only containerd's root and the cgroup tree, and nothing else of the host", () => {
    const ds = find(result.resources, "kubernetes:apps/v1:DaemonSet");
    const pod = ds.spec.template.spec;
    const hostPaths = Object.fromEntries(
      // biome-ignore lint/suspicious/noExplicitAny: volumes from inputs
      pod.volumes.filter((v: any) => v.hostPath).map((v: any) => [v.name, v.hostPath]),
    );
    expect(hostPaths).toEqual({
      bpffs: { path: "/sys/fs/bpf", type: "Directory" },
      btf: { path: "/sys/kernel/btf", type: "Directory" },
      // Only its list of active LSMs is read: whether the BPF LSM can deny.
      securityfs: { path: "/sys/kernel/security", type: "Directory" },
      "container-runtime": { path: "/run/containerd", type: "Directory" },
      spool: { path: "/var/lib/hive/spool", type: "DirectoryOrCreate" },
      // Where the agent writes the table `hive status` on the node reads (the same directory inside).
      "watch-tables": { path: WATCH_TABLE_DIR, type: "DirectoryOrCreate" },
      // Image layers, where traps are armed before containers start, and containers' cgroups.
      "containerd-root": { path: "/var/lib/containerd", type: "DirectoryOrCreate" },
      cgroup: { path: "/sys/fs/cgroup", type: "Directory" },
    });
    // biome-ignore lint/suspicious/noExplicitAny: mounts from inputs
    const mounts = Object.fromEntries(pod.containers[0].volumeMounts.map((m: any) => [m.name, m]));
    expect(mounts.bpffs).toEqual({
      name: "bpffs",
      mountPath: "/sys/fs/bpf",
      mountPropagation: "HostToContainer",
    });
    expect(mounts.btf.readOnly).toBe(true);
    expect(mounts.securityfs.readOnly).toBe(true);
    expect(mounts["container-runtime"].readOnly).toBe(true);
    expect(mounts.spool.readOnly).toBeUndefined();
    expect(mounts["watch-tables"]).toEqual({ name: "watch-tables", mountPath: WATCH_TABLE_DIR });
    expect(mounts["containerd-root"].readOnly).toBe(true);
    expect(mounts.cgroup.readOnly).toBe(true);
    // Bidirectional propagation is only allowed for privileged containers.
    for (const m of Object.values(mounts)) expect(m.mountPropagation).not.toBe("Bidirectional");
  });

  it("starts the agent with its flags, the downward-API identity and probes on the metrics port", () => {
    const ds = find(result.resources, "kubernetes:apps/v1:DaemonSet");
    const c = ds.spec.template.spec.containers[0];
    expect(c.image).toBe("registry.example.com/hive:0.1.0");
    expect(c.imagePullPolicy).toBe("IfNotPresent");
    expect(c.args).toEqual([
      "agent",
      "--log-level",
      "info",
      "--metrics-port",
      "9464",
      "--spool-dir",
      "/var/lib/hive/spool",
      "--runtime-socket",
      "/host/run/container-runtime/containerd.sock",
      "--lsm-file",
      "/host/sys/kernel/security/lsm",
      "--daemonset",
      "hive-agent",
      "--image-layers",
      "/host/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots",
      "--cgroup-root",
      "/host/sys/fs/cgroup",
    ]);
    // biome-ignore lint/suspicious/noExplicitAny: env from inputs
    expect(Object.fromEntries(c.env.map((e: any) => [e.name, e.valueFrom.fieldRef.fieldPath]))).toEqual({
      NODE_NAME: "spec.nodeName",
      POD_NAME: "metadata.name",
      POD_NAMESPACE: "metadata.namespace",
    });
    expect(c.ports).toEqual([{ name: "metrics", containerPort: 9464, protocol: "TCP" }]);
    expect(c.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "metrics" });
    // Only a stuck agent is restarted: two minutes without an answer.
    expect(c.livenessProbe.periodSeconds * c.livenessProbe.failureThreshold).toBe(120);
    expect(c.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "metrics" });
  });

  it("grants the agent only the verbs it uses, per resource, with no wildcard", () => {
    const cluster = find(result.resources, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole");
    const role = find(result.resources, "kubernetes:rbac.authorization.k8s.io/v1:Role");
    expect(verbsByResource(cluster.rules)).toEqual({
      "hive-operator.com/hivepolicies": ["list", "patch", "watch"],
      "hive-operator.com/hivepolicies/status": ["update"],
      "core/pods": ["list", "watch"],
      "core/nodes": ["get", "list", "watch"],
      "core/events": ["create", "delete", "list", "patch", "update", "watch"],
      "wgpolicyk8s.io/policyreports": ["create", "delete", "list", "update", "watch"],
    });
    expect(verbsByResource(role.rules)).toEqual({
      "hive-operator.com/hivedata": ["create", "delete", "get", "list", "patch", "update", "watch"],
      "coordination.k8s.io/leases": ["create", "get", "update"],
      "apps/daemonsets[hive-agent]": ["get"],
    });
    for (const [path, value] of walk([cluster.rules, role.rules])) {
      expect(value, path).not.toBe("*");
    }
    expect(role.metadata.namespace).toBe("hive-system");
  });

  it("binds the roles to the agent's ServiceAccount only", () => {
    const subjects = [{ kind: "ServiceAccount", name: "hive-agent", namespace: "hive-system" }];
    expect(
      find(result.resources, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding").subjects,
    ).toEqual(subjects);
    expect(find(result.resources, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding").subjects).toEqual(
      subjects,
    );
  });

  it("keeps the agent to the HiveData of its own node with an admission policy bound to deny", () => {
    const vap = findNamed(
      result.resources,
      "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
      ADMISSION_POLICY_NAME,
    );
    expect(vap.spec.failurePolicy).toBe("Fail");
    expect(vap.spec.matchConditions).toEqual([
      {
        name: "is-hive-agent",
        expression: "request.userInfo.username == 'system:serviceaccount:hive-system:hive-agent'",
      },
    ]);
    const text = JSON.stringify(vap.spec);
    expect(text).toContain("request.userInfo.extra['authentication.kubernetes.io/node-name']");
    expect(text).toContain(`metadata.labels['${LABEL_NODE}']`);
    // biome-ignore lint/suspicious/noExplicitAny: rules from inputs
    const dataRule = vap.spec.matchConstraints.resourceRules.find((r: any) =>
      r.resources.includes("hivedata"),
    );
    expect(dataRule.operations).toEqual(["CREATE", "UPDATE", "DELETE"]);
    const binding = findNamed(
      result.resources,
      "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
      ADMISSION_POLICY_NAME,
    );
    expect(binding.spec).toEqual({ policyName: vap.metadata.name, validationActions: ["Deny"] });
  });

  it("labels every object as part of Hive", () => {
    for (const r of kubernetesObjects(result.resources)) {
      expect(r.inputs.metadata.labels["app.kubernetes.io/part-of"], r.name).toBe("hive");
    }
  });
});

describe("HiveMonitor with every option set", () => {
  let result: Run;
  beforeAll(async () => {
    result = await run("full", FULL);
  });

  it("uses the existing namespace instead of creating one", () => {
    expect(result.resources.some((r) => r.type === "kubernetes:core/v1:Namespace")).toBe(false);
    expect(result.outputs.namespace).toBe("security");
    for (const r of kubernetesObjects(result.resources)) {
      const ns = r.inputs.metadata.namespace;
      if (ns !== undefined) expect(ns, r.name).toBe("security");
    }
  });

  it("builds one HivePolicy per group of traps, converting the typed fields", async () => {
    expect(result.outputs.policyNames.sort()).toEqual(["canaries", "default"]);
    const policies = result.resources.filter(
      (r) => r.type === "kubernetes:hive-operator.com/v1alpha1:HivePolicy",
    );
    const byName = Object.fromEntries(policies.map((p) => [p.inputs.metadata.name, p.inputs]));
    expect(byName.default.metadata.namespace).toBe("security");
    expect(byName.default.spec.traps).toEqual([
      { path: "/etc/shadow", match: { matchLabels: { security: "high" } } },
      {
        path: "/etc/passwd",
        accesses: ["write", "append"],
        callback: "http://receiver.monitoring.svc:8080/alerts",
        match: { namespace: "payments", "container-name": "api-.*" },
      },
    ]);
    expect(byName.canaries.spec.traps).toEqual([
      {
        path: "/srv/canary/credentials.json",
        create: true,
        mode: "0440",
        match: { pod: "ledger-0", ip: "10.0.3.7", "container-name": "ledger|ledger-sidecar" },
      },
    ]);
  });

  it("passes the callback, its Secrets, the log level and the port to the agent", () => {
    const ds = find(result.resources, "kubernetes:apps/v1:DaemonSet");
    const c = ds.spec.template.spec.containers[0];
    expect(c.args).toEqual([
      "agent",
      "--log-level",
      "debug",
      "--metrics-port",
      "9100",
      "--spool-dir",
      "/var/lib/hive/spool",
      "--runtime-socket",
      "/host/run/container-runtime/containerd.sock",
      "--lsm-file",
      "/host/sys/kernel/security/lsm",
      "--daemonset",
      "hive-agent",
      "--image-layers",
      "/host/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots",
      "--cgroup-root",
      "/host/sys/fs/cgroup",
      "--callback-headers-secret",
      "hive-callback-headers",
      "--callback-signing-secret",
      "hive-callback-signing",
      "--callback-signing-key",
      "hmac-key",
    ]);
    // The URL comes from the monitor's Secret, resolved by the kubelet: never in the arguments.
    expect(c.env).toContainEqual({
      name: "HIVE_CALLBACK",
      valueFrom: { secretKeyRef: { name: "hive-agent-callback", key: "url" } },
    });
    const secret = findNamed(result.resources, "kubernetes:core/v1:Secret", "hive-agent-callback");
    expect(secret.metadata.namespace).toBe("security");
    expect(isSecretWrapper(secret.stringData)).toBe(true); // secret in the state, always
    expect(secret.stringData.value).toEqual({ url: "https://alerts.example.com/hive" });
    expect(c.ports[0].containerPort).toBe(9100);
    expect(c.imagePullPolicy).toBe("Always");
    expect(c.resources).toEqual(FULL.resources);
  });

  it("lets the agent read and watch exactly the callback Secrets it names", () => {
    const role = find(result.resources, "kubernetes:rbac.authorization.k8s.io/v1:Role");
    expect(verbsByResource(role.rules)["core/secrets[hive-callback-headers,hive-callback-signing]"]).toEqual([
      "get",
      "list",
      "watch",
    ]);
    // biome-ignore lint/suspicious/noExplicitAny: rules from inputs
    const secretRules = role.rules.filter((r: any) => r.resources.includes("secrets"));
    expect(secretRules).toHaveLength(1);
  });

  it("takes the URL from a Secret of the user's, writing none and granting nothing on it", async () => {
    const { resources } = await run("url-secret", {
      ...FULL,
      callback: { urlSecret: { name: "siem-hook", key: "endpoint" } },
    });
    const c = find(resources, "kubernetes:apps/v1:DaemonSet").spec.template.spec.containers[0];
    expect(c.env).toContainEqual({
      name: "HIVE_CALLBACK",
      valueFrom: { secretKeyRef: { name: "siem-hook", key: "endpoint" } },
    });
    expect(resources.filter((r) => r.type === "kubernetes:core/v1:Secret")).toEqual([]);
    const role = find(resources, "kubernetes:rbac.authorization.k8s.io/v1:Role");
    // biome-ignore lint/suspicious/noExplicitAny: rules from inputs
    expect(role.rules.filter((r: any) => r.resources.includes("secrets"))).toEqual([]);
  });

  it("schedules where told: node selector, tolerations, priority class, pull secrets", () => {
    const pod = find(result.resources, "kubernetes:apps/v1:DaemonSet").spec.template.spec;
    expect(pod.nodeSelector).toEqual({
      "kubernetes.io/os": "linux",
      "hive.example.com/monitored": "true",
    });
    // Nodes of either architecture the program and image are built for.
    expect(pod.affinity).toEqual({
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: "kubernetes.io/arch", operator: "In", values: ["amd64", "arm64"] }] },
          ],
        },
      },
    });
    expect(pod.tolerations).toEqual([{ operator: "Exists" }]);
    expect(pod.priorityClassName).toBe("system-node-critical");
    expect(pod.imagePullSecrets).toEqual([{ name: "registry-creds" }]);
  });

  it("mounts the configured socket directory and spool, and adds SYS_ADMIN only for old kernels", () => {
    const pod = find(result.resources, "kubernetes:apps/v1:DaemonSet").spec.template.spec;
    // biome-ignore lint/suspicious/noExplicitAny: volumes from inputs
    const volumes = Object.fromEntries(pod.volumes.map((v: any) => [v.name, v.hostPath?.path]));
    expect(volumes["container-runtime"]).toBe("/run/k3s/containerd");
    expect(volumes.spool).toBe("/var/lib/hive-alerts");
    expect(volumes["containerd-root"]).toBe("/var/lib/rancher/k3s/agent/containerd");
    const sc = pod.containers[0].securityContext;
    expect([...sc.capabilities.add].sort()).toEqual([...BASE_CAPABILITIES, "SYS_ADMIN"].sort());
    // The API server refuses allowPrivilegeEscalation: false beside SYS_ADMIN.
    expect(sc.allowPrivilegeEscalation).toBeUndefined();
    expect(sc.privileged).toBe(false);
  });

  it("scopes the admission policy to the agent of this namespace", () => {
    const vap = findNamed(
      result.resources,
      "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
      ADMISSION_POLICY_NAME,
    );
    expect(vap.spec.matchConditions[0].expression).toBe(
      "request.userInfo.username == 'system:serviceaccount:security:hive-agent'",
    );
  });
});

describe("HiveMonitor argument errors", () => {
  it("rejects invalid options before creating any child, naming each option", async () => {
    const before = recorded.length;
    let error: unknown;
    try {
      new HiveMonitor("broken", {
        image: "registry.example.com/hive:0.1.0",
        namespace: "Hive_System",
        metricsPort: 70000,
        traps: [
          { path: "etc/shadow" },
          { path: "/etc/hosts", match: { containerName: /nginx/i, ip: "10.0.0.300" } },
          { path: "/etc/motd", mode: 0o644 },
        ],
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(pulumi.ResourceError);
    expect((error as Error).message).toBe(
      [
        'HiveMonitor "broken" has invalid options:',
        "namespace: \"Hive_System\" is not a namespace name (lowercase letters, digits and '-', at most 63)",
        'traps[0].path: must be an absolute path (start with "/")',
        'traps[1].match.containerName: RegExp flags "i" are not supported; write the pattern without flags (e.g. /[Nn]ginx/ instead of /nginx/i)',
        "traps[1].match.ip: must be an IPv4 address such as 10.0.0.7",
        "traps[2].mode: only applies with create: true",
        "metricsPort: 70000 must be a port number from 1 to 65535",
      ].join("\n"),
    );
    await settle(recorded);
    const created = recorded.slice(before).filter((r) => r.name.startsWith("broken-"));
    expect(created).toEqual([]);
  });

  it("names a missing image and unknown options", () => {
    expect(() => new HiveMonitor("typo", { imag: "x" } as unknown as HiveMonitorArgs)).toThrow(
      /imag: is not a known option[^\n]*\nimage: is required/,
    );
  });
});

describe("HiveMonitor with allow lists on its traps", () => {
  it("puts each trap's allow list into its HivePolicy, with the resource's field names", async () => {
    const { resources } = await run("allowing", {
      ...MINIMAL,
      traps: [
        {
          path: "/etc/shadow",
          match: { matchLabels: { security: "high" } },
          allow: [{ exe: "/usr/sbin/sshd" }, { parentExe: "/usr/sbin/cron", accesses: ["read"] }],
        },
        { path: "/etc/gshadow" },
      ],
    });
    const policy = find(resources, "kubernetes:hive-operator.com/v1alpha1:HivePolicy");
    expect(policy.spec.traps).toEqual([
      {
        path: "/etc/shadow",
        match: { matchLabels: { security: "high" } },
        allow: [{ exe: "/usr/sbin/sshd" }, { "parent-exe": "/usr/sbin/cron", accesses: ["read"] }],
      },
      { path: "/etc/gshadow" },
    ]);
  });

  it("names a monitor trap's bad allow entry by its typed option", () => {
    expect(
      () =>
        new HiveMonitor("allow-typo", {
          ...MINIMAL,
          traps: [{ path: "/etc/shadow", allow: [{ exe: "./sshd" }] }],
        }),
    ).toThrow(
      'traps[0].allow[0].exe: must be an absolute path (start with "/"), with "*" only as its last character',
    );
  });
});

describe("HivePolicy on its own", () => {
  it("creates a HivePolicy custom resource from typed traps", async () => {
    const policy = new HivePolicy("team-traps", {
      namespace: "payments",
      traps: [{ path: "/app/.env", create: true, mode: 0o400, match: { containerName: /api/ } }],
    });
    await resolve(policy.metadata);
    await settle(recorded);
    const r = recorded.find((x) => x.name === "team-traps");
    expect(r?.type).toBe("kubernetes:hive-operator.com/v1alpha1:HivePolicy");
    expect(r?.inputs).toEqual({
      apiVersion: "hive-operator.com/v1alpha1",
      kind: "HivePolicy",
      metadata: {
        name: "team-traps",
        namespace: "payments",
        labels: {
          "app.kubernetes.io/name": "hive",
          "app.kubernetes.io/part-of": "hive",
          "app.kubernetes.io/component": "policy",
        },
      },
      spec: {
        traps: [{ path: "/app/.env", create: true, mode: "0400", match: { "container-name": "api" } }],
      },
    });
  });

  it("converts typed allow lists to the resource's spelling, keeping only the fields given", async () => {
    const policy = new HivePolicy("shadow-readers", {
      namespace: "payments",
      traps: [
        {
          path: "/etc/shadow",
          allow: [
            { exe: "/usr/sbin/sshd" },
            { exe: "/usr/bin/passwd", accesses: ["read", "write"] },
            { parentExe: "/usr/sbin/cron" },
            { exe: "/usr/lib/openssh/*", parentExe: "/usr/sbin/sshd" },
          ],
        },
      ],
    });
    await resolve(policy.metadata);
    await settle(recorded);
    const r = recorded.find((x) => x.name === "shadow-readers");
    expect(r?.inputs.spec).toEqual({
      traps: [
        {
          path: "/etc/shadow",
          allow: [
            { exe: "/usr/sbin/sshd" },
            { exe: "/usr/bin/passwd", accesses: ["read", "write"] },
            { "parent-exe": "/usr/sbin/cron" },
            { exe: "/usr/lib/openssh/*", "parent-exe": "/usr/sbin/sshd" },
          ],
        },
      ],
    });
    expect(validatePolicySpec(r?.inputs.spec).ok).toBe(true);
  });

  it("rejects a loose allow list before creating anything, naming each typed option", async () => {
    const before = recorded.length;
    let error: unknown;
    try {
      new HivePolicy("loose", {
        namespace: "payments",
        traps: [
          {
            path: "/etc/shadow",
            allow: [
              { exe: "sshd" },
              { parentExe: "/usr/*/cron" },
              { accesses: ["read"] },
              { "parent-exe": "/usr/sbin/cron" } as AllowArgs,
            ],
          },
          { path: "/etc/passwd", allow: { exe: "/usr/sbin/sshd" } as unknown as AllowArgs[] },
        ],
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(pulumi.ResourceError);
    const absolute = 'must be an absolute path (start with "/"), with "*" only as its last character';
    expect((error as Error).message).toBe(
      [
        'HivePolicy "loose" has invalid options:',
        "traps[0].allow[3].parent-exe: is not a known option (known: exe, parentExe, accesses)",
        `traps[0].allow[0].exe: ${absolute}`,
        `traps[0].allow[1].parentExe: ${absolute}`,
        "traps[0].allow[2]: needs exe or parentExe",
        "traps[0].allow[3]: needs exe or parentExe",
        'traps[1].allow: must be a list such as [{ exe: "/usr/sbin/sshd" }]',
      ].join("\n"),
    );
    await settle(recorded);
    expect(recorded.slice(before).filter((r) => r.name === "loose")).toEqual([]);
  });

  it("rejects an empty trap list and a bad callback by option name", () => {
    expect(() => new HivePolicy("empty", { namespace: "payments", traps: [] })).toThrow(
      'HivePolicy "empty" has invalid options:\ntraps: must list at least one trap such as { path: "/etc/shadow" }',
    );
    expect(
      () =>
        new HivePolicy("bad-cb", {
          namespace: "payments",
          traps: [{ path: "/x", callback: "ftp://example.com" }],
        }),
    ).toThrow("traps[0].callback: must be an http:// or https:// URL");
  });
});

describe("HiveMonitor on clusters without ValidatingAdmissionPolicy v1", () => {
  it("leaves the admission policy out only when told to, and keeps everything else", async () => {
    const { resources } = await run("old-cluster", { ...MINIMAL, admissionPolicy: false });
    expect(resources.filter((r) => r.type.includes("ValidatingAdmissionPolicy"))).toEqual([]);
    expect(resources.filter((r) => r.type === "kubernetes:apps/v1:DaemonSet")).toHaveLength(1);
  });
});

describe("HiveMonitor ordering", () => {
  it("starts the agent after its permissions, admission policy, CRDs and callback Secret, and the policies after the agent", async () => {
    const { resources } = await run("order", {
      ...MINIMAL,
      callback: "https://alerts.example.com/hive",
      traps: [{ path: "/etc/shadow" }],
    });
    const byKind = (kind: string) => resources.filter((r) => r.type.endsWith(`:${kind}`));
    const ds = byKind("DaemonSet")[0];
    for (const kind of [
      "Namespace",
      "CustomResourceDefinition",
      "ServiceAccount",
      "ClusterRole",
      "ClusterRoleBinding",
      "Role",
      "RoleBinding",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
      "Secret",
    ]) {
      for (const r of byKind(kind)) expect(ds?.dependsOn, `DaemonSet after ${r.name}`).toContain(r.name);
    }
    expect(byKind("Secret")).toHaveLength(1);
    // Deleted before the agent on destroy, so the agent can still remove its finalizer.
    expect(byKind("HivePolicy")[0]?.dependsOn).toContain(ds?.name);
  });
});

describe("HiveMonitor's Kubernetes conventions", () => {
  it("puts the recommended labels on every object and on the agent pods, selecting by name and component only", async () => {
    const { resources } = await run("labelled", { ...MINIMAL, traps: [{ path: "/etc/shadow" }] });
    const version = JSON.parse(readFileSync(join(import.meta.dirname, "../../package.json"), "utf8")).version;
    const objects = kubernetesObjects(resources);
    expect(objects.length).toBeGreaterThan(10);
    for (const r of objects) {
      expect(r.inputs.metadata.labels, r.name).toMatchObject({
        "app.kubernetes.io/name": "hive",
        "app.kubernetes.io/instance": "labelled",
        "app.kubernetes.io/version": version,
        "app.kubernetes.io/component": expect.stringMatching(/^(agent|crd|policy)$/),
        "app.kubernetes.io/part-of": "hive",
        "app.kubernetes.io/managed-by": "pulumi",
      });
    }
    const ds = find(resources, "kubernetes:apps/v1:DaemonSet");
    expect(ds.spec.template.metadata.labels["app.kubernetes.io/instance"]).toBe("labelled");
    // A DaemonSet's selector is immutable: it must not change with the version.
    expect(ds.spec.selector.matchLabels).toEqual({
      "app.kubernetes.io/name": "hive",
      "app.kubernetes.io/component": "agent",
    });
  });

  it("creates a PodMonitor for the agents' metrics port only when asked", async () => {
    const { resources } = await run("scraped", {
      ...MINIMAL,
      metricsPort: 9100,
      podMonitor: { interval: "30s", labels: { release: "prometheus" } },
    });
    const pm = find(resources, "kubernetes:monitoring.coreos.com/v1:PodMonitor");
    expect(pm.metadata).toMatchObject({ name: "hive-agent", namespace: "hive-system" });
    expect(pm.metadata.labels.release).toBe("prometheus");
    expect(pm.spec).toEqual({
      selector: { matchLabels: { "app.kubernetes.io/name": "hive", "app.kubernetes.io/component": "agent" } },
      namespaceSelector: { matchNames: ["hive-system"] },
      podMetricsEndpoints: [{ port: "metrics", path: "/metrics", interval: "30s" }],
    });
    const ds = find(resources, "kubernetes:apps/v1:DaemonSet");
    expect(ds.spec.template.spec.containers[0].ports).toEqual([
      { name: "metrics", containerPort: 9100, protocol: "TCP" },
    ]);
  });

  it("schedules with the given affinity, pod labels and annotations, and update strategy", async () => {
    const affinity = {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchExpressions: [{ key: "pool", operator: "NotIn", values: ["gpu"] }] }],
        },
      },
    };
    const { resources } = await run("placed", {
      ...MINIMAL,
      affinity,
      podLabels: { team: "security" },
      podAnnotations: { "example.com/owner": "security team" },
      updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: "20%" } },
      tolerations: [{ key: "dedicated", operator: "Equal", value: "monitoring", effect: "NoSchedule" }],
    });
    const ds = find(resources, "kubernetes:apps/v1:DaemonSet");
    // The architecture requirement joins the given term (terms are alternatives: each carries it).
    expect(ds.spec.template.spec.affinity).toEqual({
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [
            {
              matchExpressions: [
                { key: "pool", operator: "NotIn", values: ["gpu"] },
                { key: "kubernetes.io/arch", operator: "In", values: ["amd64", "arm64"] },
              ],
            },
          ],
        },
      },
    });
    expect(ds.spec.template.spec.tolerations).toEqual([
      { key: "dedicated", operator: "Equal", value: "monitoring", effect: "NoSchedule" },
    ]);
    expect(ds.spec.template.metadata.labels.team).toBe("security");
    expect(ds.spec.template.metadata.annotations).toEqual({ "example.com/owner": "security team" });
    expect(ds.spec.updateStrategy).toEqual({
      type: "RollingUpdate",
      rollingUpdate: { maxUnavailable: "20%" },
    });
    const { resources: defaults } = await run("placed-default", MINIMAL);
    const plain = find(defaults, "kubernetes:apps/v1:DaemonSet");
    expect(plain.spec.updateStrategy).toEqual({
      type: "RollingUpdate",
      rollingUpdate: { maxUnavailable: 1 },
    });
    expect(
      plain.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution,
    ).toEqual({
      nodeSelectorTerms: [
        { matchExpressions: [{ key: "kubernetes.io/arch", operator: "In", values: ["amd64", "arm64"] }] },
      ],
    });
    expect(plain.spec.template.metadata.annotations).toBeUndefined();
  });
});
