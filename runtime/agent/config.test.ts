import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { isHiveError } from "../../api/errors.ts";
import { parseAgentConfig, readBootId } from "./config.ts";

describe("agent configuration", () => {
  it("takes the node and pod identity from the downward API environment", () => {
    const c = parseAgentConfig([], { NODE_NAME: "n1", POD_NAME: "hive-agent-x", POD_NAMESPACE: "hive" });
    expect(c).toMatchObject({
      nodeName: "n1",
      podName: "hive-agent-x",
      namespace: "hive",
      runtimeSocket: "/run/containerd/containerd.sock",
    });
    expect(c.lease.renewDeadlineMs).toBeLessThan(c.lease.leaseDurationMs);
  });
  it("lets flags win over the environment and rejects what it cannot use", () => {
    expect(parseAgentConfig(["--node-name", "n2", "--no-pods"], { NODE_NAME: "n1" })).toMatchObject({
      nodeName: "n2",
      roles: { loader: true, pods: false },
    });
    for (const [argv, env] of [
      [[], {}],
      [["--attach", "lsm"], { NODE_NAME: "n" }],
      [["--callback", "ftp://x"], { NODE_NAME: "n" }],
      [["--bogus"], { NODE_NAME: "n" }],
      [["--metrics-port", "-1"], { NODE_NAME: "n" }],
      [["--burst-gap", "0"], { NODE_NAME: "n" }],
      [["--burst-gap", "5000"], { NODE_NAME: "n" }],
    ] as [string[], NodeJS.ProcessEnv][]) {
      expect(() => parseAgentConfig(argv, env)).toThrow(expect.objectContaining({ code: "ConfigInvalid" }));
    }
  });
  it("takes the burst gap and the image layers from flags or environment", () => {
    expect(parseAgentConfig([], { NODE_NAME: "n" })).toMatchObject({ cgroupRoot: "/sys/fs/cgroup" });
    expect(parseAgentConfig([], { NODE_NAME: "n" }).burstGapMs).toBeUndefined();
    expect(parseAgentConfig([], { NODE_NAME: "n" }).imageLayers).toBeUndefined();
    expect(
      parseAgentConfig(["--burst-gap", "20", "--image-layers", "/l"], {
        NODE_NAME: "n",
        HIVE_CGROUP_ROOT: "/c",
        HIVE_RUNTIME_STATE_DIR: "/s",
      }),
    ).toMatchObject({ burstGapMs: 20, imageLayers: "/l", cgroupRoot: "/c", runtimeStateDir: "/s" });
  });
  it("takes where the pinned maps and the watch table live from flags or environment", () => {
    const defaults = parseAgentConfig([], { NODE_NAME: "n" });
    expect(defaults.pinRoot).toBeUndefined(); // the kernel loader's own default
    expect(defaults.tableDir).toBeUndefined();
    expect(
      parseAgentConfig(["--pin-root", "/sys/fs/bpf/x"], { NODE_NAME: "n", HIVE_TABLE_DIR: "/run/x" }),
    ).toMatchObject({ pinRoot: "/sys/fs/bpf/x", tableDir: "/run/x" });
  });
  it("reads the kernel's boot id once, and refuses garbage", () => {
    expect(readBootId()).toMatch(/^[0-9a-f-]{36}$/);
    const f = join(mkdtempSync(join(tmpdir(), "hive-boot-")), "boot_id");
    writeFileSync(f, "not an id\n");
    try {
      readBootId(f);
      throw new Error("accepted");
    } catch (e) {
      expect(isHiveError(e, "ConfigInvalid")).toBe(true);
    }
  });
});

interface AgentPodTemplate {
  template: {
    spec: {
      containers: {
        args: string[];
        env: {
          name: string;
          valueFrom: { fieldRef?: { fieldPath: string }; secretKeyRef?: { name: string; key: string } };
        }[];
      }[];
    };
  };
}

describe("agent configuration from the component's DaemonSet", () => {
  it("accepts every flag and variable the component gives the agent", async () => {
    const { resolveConfig } = await import("../../component/config.ts");
    const { buildManifests } = await import("../../component/render.ts");
    const resolved = resolveConfig({
      image: "registry.example.com/hive:0.1.0",
      callback: {
        url: "https://siem.example.com/hooks/hive",
        headersSecret: "hive-callback-headers",
        signingSecret: { name: "hive-signing", key: "hmac" },
      },
      tenantCallbacks: ["https://teams.example.com", "https://siem.example.com/teams/"],
    } as Parameters<typeof resolveConfig>[0]);
    if (!resolved.ok) throw new Error(JSON.stringify(resolved.problems));
    const m = buildManifests(resolved.config);
    const container = (m.daemonSet.spec as AgentPodTemplate).template.spec.containers[0];
    const [command, ...flags] = container?.args ?? [];
    expect(command).toBe("agent");
    // The environment as the kubelet gives it: the downward API, and Secret keys (the callback URL).
    const downward: Record<string, string> = {
      "spec.nodeName": "n1",
      "metadata.name": "p",
      "metadata.namespace": "hive-system",
    };
    const secrets = [m.callbackSecret].filter((o) => o !== undefined);
    const env = Object.fromEntries(
      (container?.env ?? []).map((e) => {
        const ref = e.valueFrom.secretKeyRef;
        const secret = secrets.find((o) => o.metadata.name === ref?.name);
        const value = ref
          ? (secret?.stringData as Record<string, string> | undefined)?.[ref.key]
          : downward[e.valueFrom.fieldRef?.fieldPath ?? ""];
        return [e.name, value];
      }),
    );
    const c = parseAgentConfig(flags, env);
    expect(c).toMatchObject({
      callback: "https://siem.example.com/hooks/hive",
      callbackHeadersSecret: "hive-callback-headers",
      callbackSigningSecret: "hive-signing",
      callbackSigningKey: "hmac",
      spoolDir: "/var/lib/hive/spool",
      daemonSet: "hive-agent",
      // A bare origin is normalized to its "/": no look-alike host passes as a prefix.
      tenantCallbacks: ["https://teams.example.com/", "https://siem.example.com/teams/"],
    });
    expect(c.runtimeSocket.endsWith("containerd.sock")).toBe(true);
  });
});
