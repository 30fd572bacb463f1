import { describe, expect, it } from "vitest";
import { inodeOf } from "../../api/data.ts";
import { dataName, trapId } from "../../api/ids.ts";
import { ANNOTATION_RESOLVE_REQUEST } from "../../api/meta.ts";
import { validateData } from "../../api/validate.ts";
import { buildHiveData, dataUpToDate, keyText, parseKeyText } from "./hive-data.ts";

const input = {
  policy: {
    apiVersion: "hive-operator.com/v1alpha1" as const,
    kind: "HivePolicy" as const,
    metadata: { name: "p", namespace: "hive" },
    spec: { traps: [{ path: "/etc/shadow" }] },
  },
  trap: { path: "/etc/shadow", callback: "http://receiver/alerts" },
  trapId: trapId({ namespace: "hive", name: "p" }, { path: "/etc/shadow" }),
  pod: { metadata: { name: "web", namespace: "prod", uid: "u-1" }, status: { podIP: "10.0.0.1" } },
  container: { name: "app", containerId: "containerd://abc" },
  kernelId: "eeeeeeee-5555-4555-8555-555555555555",
  nodeName: "node-1",
  namespace: "hive-system",
  file: { major: 0, minor: 50, ino: 1234n },
  parent: { major: 0, minor: 50, ino: 12n },
};

describe("HiveData for one trap × container", () => {
  it("is valid, deterministic, lives in the monitor's namespace and names its pod without owning it", () => {
    const d = buildHiveData(input);
    expect(validateData(d)).toMatchObject({ ok: true });
    expect(d.metadata.name).toBe(dataName(input.trapId, "containerd://abc", "web"));
    expect(d.metadata.namespace).toBe("hive-system");
    // An owner must share the dependent's namespace: the pod is named by annotations instead.
    expect(d.metadata.ownerReferences).toBeUndefined();
    expect(d.metadata.annotations).toMatchObject({ namespace: "prod", pod_name: "web", pod_uid: "u-1" });
    expect(d.spec.accesses).toEqual(["read", "write", "exec", "append", "open"]);
    expect(buildHiveData(input)).toEqual(d);
  });
  it("needs a write only when something the loader or the alert uses changed", () => {
    const d = buildHiveData(input);
    const stored = {
      ...d,
      metadata: {
        ...d.metadata,
        resourceVersion: "7",
        annotations: { ...d.metadata.annotations, [ANNOTATION_RESOLVE_REQUEST]: "1" },
      },
    };
    expect(dataUpToDate(stored, d)).toBe(true);
    expect(dataUpToDate(stored, buildHiveData({ ...input, file: { ...input.file, ino: 99n } }))).toBe(false);
    // Where alerts go is read from the live policy, not from the HiveData: no write for it.
    expect(dataUpToDate(stored, buildHiveData({ ...input, trap: { path: "/etc/shadow" } }))).toBe(true);
    expect(dataUpToDate(stored, buildHiveData({ ...input, trap: { path: "/etc/passwd" } }))).toBe(false);
  });
  it("carries an inode number beyond 2^53 exactly, and still reads integers written before", () => {
    const ino = (1n << 63n) + 5n; // overlayfs xino: layer bits at the top of the number
    const d = buildHiveData({ ...input, file: { ...input.file, ino } });
    expect(validateData(d)).toMatchObject({ ok: true });
    expect(d.spec["inode-no"]).toBe("9223372036854775813");
    expect(inodeOf(d.spec)).toBe(ino);
    expect(inodeOf({ "inode-no": 1234 })).toBe(1234n);
    expect(inodeOf({ "inode-no": "18446744073709551616" })).toBeUndefined(); // 2^64: no such inode
    expect(validateData({ ...d, spec: { ...d.spec, "inode-no": "12a" } })).toMatchObject({ ok: false });
  });
  it("carries neither the trap's callback nor its allow list: the loader reads them from the live policy", () => {
    const allow = [{ exe: "/usr/sbin/sshd" }];
    const d = buildHiveData({ ...input, trap: { ...input.trap, allow } });
    expect(validateData(d)).toMatchObject({ ok: true });
    expect("allow" in d.spec).toBe(false);
    expect("callback" in (d.metadata.annotations ?? {})).toBe(false);
    // The schema has no place for them either (a stored one is pruned, a validated one refused).
    expect(validateData({ ...d, spec: { ...d.spec, allow } })).toMatchObject({ ok: false });
  });
  it("keeps traps that differ only in their allowlists apart, and existing trap ids unchanged", () => {
    const ref = { namespace: "hive", name: "p" };
    const bare = trapId(ref, { path: "/etc/shadow" });
    expect(trapId(ref, { path: "/etc/shadow", allow: [{ exe: "/usr/sbin/sshd" }] })).not.toBe(bare);
    expect(trapId(ref, { path: "/etc/shadow", allow: undefined })).toBe(bare);
  });
  it("writes file keys as text and reads them back", () => {
    expect(parseKeyText(keyText(input.file))).toEqual(input.file);
    expect(parseKeyText("x:1:2")).toBeUndefined();
  });
});
