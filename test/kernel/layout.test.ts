/**
 * The TypeScript layouts (runtime/kernel/layout.ts) must equal the C structs of
 * bpf/hive.h as compiled into each architecture's object (bpf/hive.bpf.o, bpf/hive.arm64.bpf.o):
 * read every struct from each object's BTF.
 */

import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ARCHITECTURES, type Architecture } from "../../api/architecture.ts";
import { eventAt, eventFields, retainedEvent } from "../../runtime/kernel/event-decode.ts";
import { recordBatch } from "../../runtime/kernel/event-record.ts";
import {
  ACTIONS,
  ALLOW_ANY,
  ALLOW_ENTRIES,
  ALLOW_KEY_LAYOUT,
  ALLOW_LAYOUT,
  COUNTERS_LAYOUT,
  DENY_BITS,
  decodeBurstTimes,
  decodeEvent,
  decodeKey,
  decodeProc,
  decodeProvenance,
  decodeValue,
  EVENT_LAYOUT,
  encodeKey,
  encodeValue,
  FLOOD_KEY_LAYOUT,
  FLOOD_LAYOUT,
  floodKeyOf,
  KEY_LAYOUT,
  PROC_LAYOUT,
  PROOF_LAYOUT,
  QUIET_KEY_LAYOUT,
  VALUE_LAYOUT,
  WATCH_FLAGS,
} from "../../runtime/kernel/layout.ts";
import { objectPathFor } from "../../runtime/kernel/object-path.ts";

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

function btfTypes(objectPath: string): BtfType[] {
  if (!existsSync(objectPath)) execFileSync("sh", ["bpf/build.sh"]);
  const json = execFileSync("bpftool", ["btf", "dump", "file", objectPath, "format", "raw", "-j"], {
    encoding: "utf8",
  });
  return (JSON.parse(json) as { types: BtfType[] }).types;
}

function tsFields(layout: Record<string, number>, skip: string[] = []): Record<string, number> {
  return Object.fromEntries(Object.entries(layout).filter(([k]) => k !== "size" && !skip.includes(k)));
}

/** The `#define NAME value` constants of bpf/hive.h (the flags BTF does not carry). */
const HIVE_H = new Map(
  [
    ...readFileSync(new URL("../../bpf/hive.h", import.meta.url), "utf8").matchAll(
      /^#define (HIVE_\w+) (0x[0-9a-f]+|\d+)\b/gim,
    ),
  ].map((m) => [m[1] as string, Number(m[2])]),
);
function define(name: string): number {
  const value = HIVE_H.get(name);
  if (value === undefined) throw new Error(`bpf/hive.h defines no ${name}`);
  return value;
}

for (const arch of Object.keys(ARCHITECTURES) as Architecture[]) {
  const types = btfTypes(objectPathFor(arch));
  const structs = new Map(
    types.filter((t) => t.kind === "STRUCT" && t.name).map((t) => [t.name as string, t]),
  );

  const offsets = (name: string): { size: number; fields: Record<string, number> } => {
    const t = structs.get(name);
    if (!t) throw new Error(`struct ${name} is not in the object's BTF`);
    const fields: Record<string, number> = {};
    for (const m of t.members ?? []) if (!m.name.startsWith("_")) fields[m.name] = m.bits_offset / 8;
    return { size: t.size ?? -1, fields };
  };

  describe(`kernel struct layouts match the BTF of bpf/${ARCHITECTURES[arch].object}`, () => {
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
      expect(tsFields(EVENT_LAYOUT, ["commSize", "cgroupNameSize"])).toEqual(btf.fields);
      expect(EVENT_LAYOUT.cgroupNameSize).toBe(define("HIVE_CGROUP_NAME_MAX"));
    });

    it("hive_proof", () => {
      const btf = offsets("hive_proof");
      expect(PROOF_LAYOUT.size).toBe(btf.size);
      expect(tsFields(PROOF_LAYOUT, ["idsCount"])).toEqual(btf.fields);
      const ids = structs.get("hive_proof")?.members?.find((m) => m.name === "ids");
      expect(types.find((t) => t.id === ids?.type_id)?.nr_elems).toBe(PROOF_LAYOUT.idsCount);
    });

    it("hive_flood_key and hive_flood", () => {
      for (const [name, layout] of [
        ["hive_flood_key", FLOOD_KEY_LAYOUT],
        ["hive_flood", FLOOD_LAYOUT],
      ] as const) {
        const btf = offsets(name);
        expect(layout.size, name).toBe(btf.size);
        expect(tsFields(layout), name).toEqual(btf.fields);
      }
    });

    it("hive_flood_key's fields are hive_event's of the same names and widths (a key is built from an event)", () => {
      const sizeOf = (struct: string, field: string) => {
        let id = structs.get(struct)?.members?.find((m) => m.name === field)?.type_id;
        // Through typedefs (__u32 → unsigned int) to the sized type.
        for (
          let t = types.find((x) => x.id === id);
          t && t.size === undefined;
          t = types.find((x) => x.id === id)
        )
          id = (t as { type_id?: number }).type_id;
        return types.find((x) => x.id === id)?.size;
      };
      for (const field of Object.keys(tsFields(FLOOD_KEY_LAYOUT))) {
        expect(sizeOf("hive_event", field), field).toBeDefined();
        expect(sizeOf("hive_flood_key", field), field).toBe(sizeOf("hive_event", field));
      }
    });

    it("hive_quiet_key", () => {
      const btf = offsets("hive_quiet_key");
      expect(QUIET_KEY_LAYOUT.size).toBe(btf.size);
      expect(tsFields(QUIET_KEY_LAYOUT)).toEqual(btf.fields);
    });

    it("hive_allow_key, hive_allow and their constants", () => {
      const key = offsets("hive_allow_key");
      expect(ALLOW_KEY_LAYOUT.size).toBe(key.size);
      expect(tsFields(ALLOW_KEY_LAYOUT)).toEqual(key.fields);
      const value = offsets("hive_allow");
      expect(ALLOW_LAYOUT.size).toBe(value.size);
      expect(tsFields(ALLOW_LAYOUT)).toEqual(value.fields);
      expect(ALLOW_ENTRIES).toBe(define("HIVE_ALLOW_ENTRIES"));
      expect(ALLOW_ANY).toBe(define("HIVE_ALLOW_ANY"));
      expect(WATCH_FLAGS).toEqual({
        allow: define("HIVE_WATCH_ALLOW"),
        allowParent: define("HIVE_WATCH_ALLOW_PARENT"),
      });
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
      buf.writeUInt32LE(9, at("group"));
      buf.write("cat", at("comm"));
      buf.writeBigUInt64LE(90n, at("exec_ns"));
      buf.writeBigUInt64LE(80n, at("grandparent_start_ns"));
      buf.writeUInt32LE(77, at("grandparent_pid"));
      buf.writeUInt32LE(999, at("ppid"));
      buf.writeUInt32LE(5, at("ns_pid"));
      // Recorded at exec, truncated, an image layer's file, run with LD_PRELOAD set.
      const exeFlags =
        define("HIVE_EXE_EXEC") |
        define("HIVE_EXE_TRUNCATED") |
        define("HIVE_EXE_IMAGE") |
        define("HIVE_EXE_LD_PRELOAD");
      expect(exeFlags).toBe(0x11101);
      buf.writeUInt32LE(exeFlags, at("exe_flags"));
      buf.writeUInt32LE(0, at("parent_flags")); // unknown: the path bytes below are ignored
      buf.write("bash", at("parent_comm"));
      buf.write("/usr/bin/cat", at("exe"));
      buf.write("/stale/path", at("parent_exe"));
      buf.writeUInt32LE(define("HIVE_REL_CHROOT") | define("HIVE_REL_PARENT_EXECED"), at("relation"));
      buf.writeBigUInt64LE(0x2_0000_0007n, at("exe_ino"));
      buf.writeBigUInt64LE(55n, at("parent_exe_ino"));
      buf.writeUInt32LE((0 << 20) | 40, at("exe_dev"));
      buf.writeUInt32LE((8 << 20) | 1, at("parent_exe_dev"));
      buf.writeUInt32LE((0 << 20) | 41, at("root_dev"));
      buf.writeBigUInt64LE(12n, at("held_bursts"));
      buf.writeBigUInt64LE(36n, at("held_checks"));
      buf.write(`${"ab".repeat(32)}`, at("cgroup_name"));
      buf.write("pod6f1c3e0a-2b7d-4c51-9a8e-0d2f4b6c8e10", at("cgroup_parent"));
      buf.writeUInt32LE(4, at("cgroup_level"));
      const event = decodeEvent(buf);
      expect(event).toMatchObject({
        ktimeNs: 111n,
        key: { major: 259, minor: 3, ino: 0x1_0000_0001n },
        mask: 0x24,
        accesses: ["read", "open"],
        kind: "parent",
        slot: 9,
        group: 9,
        pid: 1001,
        tgid: 1000,
        uid: 65534,
        gid: 65533,
        comm: "cat",
        cgroupId: 777n,
        cgroupNames: { name: "ab".repeat(32), parent: "pod6f1c3e0a-2b7d-4c51-9a8e-0d2f4b6c8e10", level: 4 },
        count: 3,
        heldTotal: { bursts: 12n, checks: 36n },
        process: {
          exe: { exe: "/usr/bin/cat", source: "exec", truncated: true },
          provenance: {
            file: { major: 0, minor: 40, ino: 0x2_0000_0007n },
            layer: "image",
            loaderEnv: ["LD_PRELOAD"],
            envUnread: false,
            traced: false,
            forkUnseen: false,
          },
          chroot: true,
          rootDev: { major: 0, minor: 41 },
          execNs: 90n,
          nsPid: 5,
          ppid: 999,
          parent: {
            pid: 999,
            comm: "bash",
            exe: { source: "unknown" },
            provenance: {
              file: { major: 8, minor: 1, ino: 55n },
              layer: "other",
              loaderEnv: [],
              envUnread: false,
              traced: false,
              forkUnseen: false,
            },
            chroot: false,
            execedSinceFork: true,
            reparented: false,
          },
          grandparent: { pid: 77, startNs: 80n },
        },
      });
      expect(event.process.provenance).toEqual(
        decodeProvenance(exeFlags, { major: 0, minor: 40, ino: 0x2_0000_0007n }),
      );

      // The flood key is the burst's file, cgroup and every fact an allow decision reads of the
      // process: the same program with LD_PRELOAD, or under another parent, is another key.
      const keyOf = (write: () => void) => {
        const saved = Buffer.from(buf);
        write();
        const key = floodKeyOf(buf).toString("hex");
        saved.copy(buf);
        return key;
      };
      const base = floodKeyOf(buf).toString("hex");
      expect(keyOf(() => buf.writeUInt32LE(4242, at("pid")))).toBe(base);
      expect(keyOf(() => buf.write("other", at("comm")))).toBe(base);
      expect(
        keyOf(() => buf.writeUInt32LE(exeFlags & ~define("HIVE_EXE_LD_PRELOAD"), at("exe_flags"))),
      ).not.toBe(base);
      expect(keyOf(() => buf.writeBigUInt64LE(56n, at("parent_exe_ino")))).not.toBe(base);
      expect(keyOf(() => buf.writeUInt32LE(0, at("relation")))).not.toBe(base);
      expect(keyOf(() => buf.writeUInt32LE((0 << 20) | 42, at("root_dev")))).not.toBe(base);
      expect(keyOf(() => buf.writeUInt32LE(define("HIVE_EXE_TRACED"), at("parent_flags")))).not.toBe(base);

      // The other relation bits, each on its own field.
      buf.writeUInt32LE(define("HIVE_REL_PARENT_CHROOT") | define("HIVE_REL_REPARENTED"), at("relation"));
      expect(decodeEvent(buf).process).toMatchObject({
        chroot: false,
        parent: { chroot: true, execedSinceFork: false, reparented: true },
      });

      // Read in place from a batch (the ring consumer's way): the same event, at any record;
      // kept, it holds its own bytes, unchanged when the batch is reused.
      const batch = recordBatch(
        Buffer.concat([Buffer.alloc(EVENT_LAYOUT.size), buf, Buffer.alloc(EVENT_LAYOUT.size)]),
      );
      const inPlace = eventAt(batch, EVENT_LAYOUT.size);
      expect(eventFields(inPlace)).toEqual(eventFields(decodeEvent(buf)));
      const kept = retainedEvent(inPlace);
      batch.bytes.fill(0);
      expect(eventFields(kept)).toEqual(eventFields(decodeEvent(buf)));
      expect(() => eventAt(batch, 2 * EVENT_LAYOUT.size + 8)).toThrow(RangeError);
    });

    it("decodes every provenance flag of bpf/hive.h", () => {
      const file = { major: 0, minor: 40, ino: 7n };
      const honest = {
        file,
        layer: "image",
        loaderEnv: [],
        envUnread: false,
        traced: false,
        forkUnseen: false,
      };
      const image = define("HIVE_EXE_EXEC") | define("HIVE_EXE_IMAGE");
      expect(decodeProvenance(image, file)).toEqual(honest);
      expect(decodeProvenance(define("HIVE_EXE_EXEC"), file)).toEqual({ ...honest, layer: "other" });
      expect(decodeProvenance(define("HIVE_EXE_WRITTEN"), file)).toEqual({ ...honest, layer: "container" });
      expect(decodeProvenance(define("HIVE_EXE_UNLINKED"), file)).toEqual({ ...honest, layer: "unlinked" });
      // An unlinked file wins over where it was; a written one over the image.
      expect(
        decodeProvenance(image | define("HIVE_EXE_WRITTEN") | define("HIVE_EXE_UNLINKED"), file).layer,
      ).toBe("unlinked");
      expect(decodeProvenance(image | define("HIVE_EXE_WRITTEN"), file).layer).toBe("container");
      const all =
        image |
        define("HIVE_EXE_LD_PRELOAD") |
        define("HIVE_EXE_LD_AUDIT") |
        define("HIVE_EXE_LD_LIBRARY_PATH");
      expect(decodeProvenance(all, file).loaderEnv).toEqual(["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH"]);
      expect(decodeProvenance(image | define("HIVE_EXE_LD_AUDIT"), file).loaderEnv).toEqual(["LD_AUDIT"]);
      expect(decodeProvenance(image | define("HIVE_EXE_LD_LIBRARY_PATH"), file).loaderEnv).toEqual([
        "LD_LIBRARY_PATH",
      ]);
      expect(decodeProvenance(image | define("HIVE_EXE_ENV_UNREAD"), file)).toEqual({
        ...honest,
        envUnread: true,
      });
      expect(decodeProvenance(image | define("HIVE_EXE_TRACED"), file)).toEqual({ ...honest, traced: true });
      expect(decodeProvenance(image | define("HIVE_EXE_FORK_UNSEEN"), file)).toEqual({
        ...honest,
        forkUnseen: true,
      });
      // The path's flags and the source say nothing of the file.
      const path = define("HIVE_EXE_SEED") | define("HIVE_EXE_TRUNCATED") | define("HIVE_EXE_UNREACHABLE");
      expect(decodeProvenance(image | path, file)).toEqual(honest);
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
      expect(value.readUInt32LE(v.action)).toBe(define("HIVE_ACTION_ALERT"));
      const entry = { key: { major: 8, minor: 17, ino: 42n }, slot: 5, accesses: ["read" as const] };
      expect(encodeValue({ ...entry, kind: "file", deny: "deny" }).readUInt32LE(v.action)).toBe(
        define("HIVE_ACTION_DENY"),
      );
      expect(encodeValue({ ...entry, kind: "file", deny: "dryRun" }).readUInt32LE(v.action)).toBe(
        define("HIVE_ACTION_DRY_RUN"),
      );
      // A directory's entry never denies, whatever it is given.
      expect(encodeValue({ ...entry, kind: "parent", deny: "deny" }).readUInt32LE(v.action)).toBe(0);
      expect(decodeValue(encodeValue({ ...entry, kind: "file", deny: "deny" })).action).toBe(ACTIONS.deny);
    });

    it("decodes a denying entry's outcome from the mask bits of bpf/hive.h, apart from the access kinds", () => {
      const { size, fields } = offsets("hive_event");
      const buf = Buffer.alloc(size);
      const mask = fields.mask ?? -1;
      buf.writeUInt32LE(0x24 | define("HIVE_DENIED"), mask);
      const denied = decodeEvent(buf);
      expect(denied.deny).toBe("denied");
      expect(denied.mask).toBe(0x24);
      expect(denied.accesses).toEqual(["read", "open"]);
      buf.writeUInt32LE(0x04 | define("HIVE_DENY_DRY_RUN"), mask);
      expect(decodeEvent(buf).deny).toBe("dryRun");
      buf.writeUInt32LE(0x04, mask);
      expect(decodeEvent(buf).deny).toBeUndefined();
      expect(DENY_BITS).toEqual({ denied: define("HIVE_DENIED"), dryRun: define("HIVE_DENY_DRY_RUN") });
    });
  });
}
