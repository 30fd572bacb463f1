/**
 * The TypeScript layouts (runtime/kernel/layout.ts) must equal the C structs of
 * bpf/hive.h as compiled into bpf/hive.bpf.o: read every struct from the object's BTF.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  COUNTERS_LAYOUT,
  decodeBurstTimes,
  decodeEvent,
  decodeKey,
  decodeProc,
  EVENT_LAYOUT,
  encodeKey,
  encodeValue,
  KEY_LAYOUT,
  PROC_LAYOUT,
  PROOF_LAYOUT,
  VALUE_LAYOUT,
} from "../../runtime/kernel/layout.ts";
import { DEFAULT_OBJECT_PATH } from "../../runtime/kernel/loader.ts";

interface BtfMember {
  name: string;
  bits_offset: number;
  type_id: number;
}
interface BtfType {
  id: number;
  nr_elems?: number;
  name?: string;
  kind: string;
  size?: number;
  members?: BtfMember[];
}

function btfTypes(): BtfType[] {
  if (!existsSync(DEFAULT_OBJECT_PATH)) execFileSync("sh", ["bpf/build.sh"]);
  const json = execFileSync("bpftool", ["btf", "dump", "file", DEFAULT_OBJECT_PATH, "format", "raw", "-j"], {
    encoding: "utf8",
  });
  return (JSON.parse(json) as { types: BtfType[] }).types;
}

const types = btfTypes();
const structs = new Map(types.filter((t) => t.kind === "STRUCT" && t.name).map((t) => [t.name as string, t]));

function offsets(name: string): { size: number; fields: Record<string, number> } {
  const t = structs.get(name);
  if (!t) throw new Error(`struct ${name} is not in the object's BTF`);
  const fields: Record<string, number> = {};
  for (const m of t.members ?? []) if (!m.name.startsWith("_")) fields[m.name] = m.bits_offset / 8;
  return { size: t.size ?? -1, fields };
}

function tsFields(layout: Record<string, number>, skip: string[] = []): Record<string, number> {
  return Object.fromEntries(Object.entries(layout).filter(([k]) => k !== "size" && !skip.includes(k)));
}

describe("kernel struct layouts match the compiled object's BTF", () => {
  it("hive_key", () => {
    const btf = offsets("hive_key");
    expect(KEY_LAYOUT.size).toBe(btf.size);
    expect(tsFields(KEY_LAYOUT)).toEqual(btf.fields);
  });

  it("hive_value", () => {
    const btf = offsets("hive_value");
    expect(VALUE_LAYOUT.size).toBe(btf.size);
    expect(tsFields(VALUE_LAYOUT)).toEqual(btf.fields);
  });

  it("hive_event", () => {
    const btf = offsets("hive_event");
    expect(EVENT_LAYOUT.size).toBe(btf.size);
    expect(tsFields(EVENT_LAYOUT, ["commSize"])).toEqual(btf.fields);
  });

  it("hive_proof", () => {
    const btf = offsets("hive_proof");
    expect(PROOF_LAYOUT.size).toBe(btf.size);
    expect(tsFields(PROOF_LAYOUT, ["idsCount"])).toEqual(btf.fields);
    const ids = structs.get("hive_proof")?.members?.find((m) => m.name === "ids");
    expect(types.find((t) => t.id === ids?.type_id)?.nr_elems).toBe(PROOF_LAYOUT.idsCount);
  });

  it("hive_counters", () => {
    const btf = offsets("hive_counters");
    expect(COUNTERS_LAYOUT.size).toBe(btf.size);
    expect(tsFields(COUNTERS_LAYOUT)).toEqual(btf.fields);
  });

  it("decodes an event written at the BTF's offsets", () => {
    const { size, fields } = offsets("hive_event");
    const buf = Buffer.alloc(size);
    const at = (name: string) => {
      const offset = fields[name];
      if (offset === undefined) throw new Error(`no field ${name}`);
      return offset;
    };
    buf.writeBigUInt64LE(111n, at("ktime_ns"));
    buf.writeBigUInt64LE(222n, at("last_ns"));
    buf.writeBigUInt64LE(0x1_0000_0001n, at("ino"));
    buf.writeBigUInt64LE(777n, at("cgroup_id"));
    buf.writeUInt32LE((259 << 20) | 3, at("dev"));
    buf.writeUInt32LE(0x24, at("mask")); // MAY_OPEN | MAY_READ
    buf.writeUInt32LE(1001, at("pid"));
    buf.writeUInt32LE(1000, at("tgid"));
    buf.writeUInt32LE(65534, at("uid"));
    buf.writeUInt32LE(65533, at("gid"));
    buf.writeUInt32LE(9, at("slot"));
    buf.writeUInt32LE(3, at("count"));
    buf.writeUInt32LE(1, at("kind"));
    buf.write("cat", at("comm"));
    buf.writeBigUInt64LE(90n, at("exec_ns"));
    buf.writeBigUInt64LE(80n, at("grandparent_start_ns"));
    buf.writeUInt32LE(77, at("grandparent_pid"));
    buf.writeUInt32LE(999, at("ppid"));
    buf.writeUInt32LE(5, at("ns_pid"));
    buf.writeUInt32LE(0x101, at("exe_flags")); // recorded at exec, truncated
    buf.writeUInt32LE(0, at("parent_flags")); // unknown: the path bytes below are ignored
    buf.write("bash", at("parent_comm"));
    buf.write("/usr/bin/cat", at("exe"));
    buf.write("/stale/path", at("parent_exe"));
    expect(decodeEvent(buf)).toEqual({
      ktimeNs: 111n,
      key: { major: 259, minor: 3, ino: 0x1_0000_0001n },
      mask: 0x24,
      accesses: ["read", "open"],
      kind: "parent",
      slot: 9,
      pid: 1001,
      tgid: 1000,
      uid: 65534,
      gid: 65533,
      comm: "cat",
      cgroupId: 777n,
      count: 3,
      process: {
        exe: { exe: "/usr/bin/cat", source: "exec", truncated: true },
        execNs: 90n,
        nsPid: 5,
        ppid: 999,
        parent: { pid: 999, comm: "bash", exe: { source: "unknown" } },
        grandparent: { pid: 77, startNs: 80n },
      },
    });
  });

  it("hive_proc, and decodes a process entry written at the BTF's offsets", () => {
    const { size, fields } = offsets("hive_proc");
    expect(PROC_LAYOUT.size).toBe(size);
    expect(tsFields(PROC_LAYOUT)).toEqual(fields);
    const buf = Buffer.alloc(size);
    buf.writeBigUInt64LE(10n, fields.start_ns ?? -1);
    buf.writeBigUInt64LE(20n, fields.exec_ns ?? -1);
    buf.writeBigUInt64LE(5n, fields.parent_start_ns ?? -1);
    buf.writeUInt32LE(1, fields.ppid ?? -1);
    buf.writeUInt32LE(1, fields.ns_pid ?? -1);
    buf.writeUInt32LE(1000, fields.uid ?? -1);
    buf.writeUInt32LE(2, fields.flags ?? -1); // seeded
    buf.write("/usr/sbin/sshd", fields.exe ?? -1);
    expect(decodeProc(buf)).toEqual({
      startNs: 10n,
      execNs: 20n,
      parentStartNs: 5n,
      ppid: 1,
      nsPid: 1,
      uid: 1000,
      exe: { exe: "/usr/sbin/sshd", source: "seed" },
    });
  });

  it("reads a burst's identity and times at the BTF's offsets", () => {
    const { size, fields } = offsets("hive_event");
    const buf = Buffer.alloc(size);
    buf.writeBigUInt64LE(111n, fields.ktime_ns ?? -1);
    buf.writeBigUInt64LE(222n, fields.last_ns ?? -1);
    buf.writeUInt32LE(1001, fields.pid ?? -1);
    expect(decodeBurstTimes(buf)).toEqual({ pid: 1001, ktimeNs: 111n, lastNs: 222n });
  });

  it("encodes keys and values at the BTF's offsets", () => {
    const key = encodeKey({ major: 8, minor: 17, ino: 42n });
    const k = offsets("hive_key").fields;
    expect(key.readBigUInt64LE(k.ino)).toBe(42n);
    expect(key.readUInt32LE(k.dev)).toBe((8 << 20) | 17);
    expect(decodeKey(key)).toEqual({ major: 8, minor: 17, ino: 42n });
    const value = encodeValue({
      key: { major: 8, minor: 17, ino: 42n },
      slot: 5,
      accesses: ["write", "exec"],
      kind: "file",
    });
    const v = offsets("hive_value").fields;
    expect(value.readUInt32LE(v.slot)).toBe(5);
    expect(value.readUInt32LE(v.mask)).toBe(0x03);
    expect(value.readUInt32LE(v.kind)).toBe(0);
  });
});
