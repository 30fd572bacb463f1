/**
 * Reads the running kernel's BTF to learn inode_permission's signature: (inode, mask)
 * before 5.12, (user_namespace *, inode, mask) from 5.12, (mnt_idmap *, inode, mask)
 * from 6.3. The answer goes into the program's read-only data (hive_inode_arg).
 */
import { existsSync } from "node:fs";
import koffi from "koffi";
import { HiveError } from "../../api/errors.ts";
import { libbpf } from "./libbpf-ffi.ts";

const BTF_KIND_PTR = 2;
const BTF_KIND_STRUCT = 4;
const BTF_KIND_TYPEDEF = 8;
const BTF_KIND_VOLATILE = 9;
const BTF_KIND_CONST = 10;
const BTF_KIND_RESTRICT = 11;
const BTF_KIND_FUNC = 12;
const BTF_KIND_VAR = 14;
const BTF_KIND_DATASEC = 15;
/** struct btf_type: name_off, info, size/type; vlen entries of the kind follow it. */
const BTF_TYPE_SIZE = 12;

export const VMLINUX_BTF = "/sys/kernel/btf/vmlinux";

export interface InodePermissionSignature {
  /** Index of the `struct inode *` argument (0 or 1). */
  inodeArg: 0 | 1;
  /** Names of the parameters' pointee types, e.g. ["mnt_idmap", "inode", "int"]. */
  params: string[];
  /**
   * Index of do_truncate's `struct dentry *` (0 before 5.12, 1 after): where the truncate hook
   * finds the file (bpf/hive.bpf.c hive_truncate_arg).
   */
  truncateDentryArg: 0 | 1;
}

interface BtfType {
  nameOff: number;
  kind: number;
  vlen: number;
  type: number;
  address: bigint;
}

function readType(btf: bigint, id: number): BtfType {
  const lib = libbpf();
  const address = lib.btf__type_by_id(btf, id) as bigint;
  const words = new Uint32Array(koffi.view(address, BTF_TYPE_SIZE).slice(0));
  const info = words[1] ?? 0;
  return {
    nameOff: words[0] ?? 0,
    kind: (info >>> 24) & 0x1f,
    vlen: info & 0xffff,
    type: words[2] ?? 0,
    address,
  };
}

/** The `vlen` entries after a type's header (btf_param, btf_var_secinfo), as u32 words. */
function entryWords(t: BtfType, wordsPerEntry: number): Uint32Array {
  if (t.vlen === 0) return new Uint32Array(0);
  return new Uint32Array(koffi.view(t.address + BigInt(BTF_TYPE_SIZE), t.vlen * wordsPerEntry * 4).slice(0));
}

/** Follows modifiers and pointers to a name: `struct inode *` → "inode". */
function pointeeName(btf: bigint, id: number): string {
  const lib = libbpf();
  let t = readType(btf, id);
  for (let guard = 0; guard < 16; guard++) {
    if (
      t.kind === BTF_KIND_PTR ||
      t.kind === BTF_KIND_CONST ||
      t.kind === BTF_KIND_VOLATILE ||
      t.kind === BTF_KIND_RESTRICT ||
      (t.kind === BTF_KIND_TYPEDEF && t.type !== 0)
    ) {
      if (t.type === 0) return "void";
      t = readType(btf, t.type);
      continue;
    }
    break;
  }
  return t.kind === BTF_KIND_STRUCT || t.nameOff ? (lib.btf__name_by_offset(btf, t.nameOff) as string) : "?";
}

/** The pointee type names of a function's parameters. */
function paramPointees(btf: bigint, funcId: number): string[] {
  const proto = readType(btf, readType(btf, funcId).type);
  const raw = entryWords(proto, 2); // btf_param {name_off, type}
  const params: string[] = [];
  for (let i = 0; i < proto.vlen; i++) params.push(pointeeName(btf, raw[i * 2 + 1] ?? 0));
  return params;
}

export function inodePermissionSignature(): InodePermissionSignature {
  if (!existsSync(VMLINUX_BTF)) {
    throw new HiveError("BtfMissing", "the kernel exposes no BTF", {
      object: VMLINUX_BTF,
      hint: "use a kernel built with CONFIG_DEBUG_INFO_BTF=y (all supported Debian kernels are)",
    });
  }
  const lib = libbpf();
  const btf = lib.btf__load_vmlinux_btf() as bigint | null;
  if (!btf) {
    throw new HiveError("BtfMissing", "cannot read the kernel's BTF", {
      object: VMLINUX_BTF,
      errno: koffi.errno(),
    });
  }
  try {
    const funcId = lib.btf__find_by_name_kind(btf, "inode_permission", BTF_KIND_FUNC) as number;
    if (funcId < 0) {
      throw new HiveError("BtfMissing", "inode_permission is not in the kernel's BTF", {
        object: VMLINUX_BTF,
        hint: "this kernel is not supported: inode_permission must exist and be traceable",
      });
    }
    const params = paramPointees(btf, funcId);
    const inodeArg = params.indexOf("inode");
    if (inodeArg !== 0 && inodeArg !== 1) {
      throw new HiveError("BtfMissing", `unexpected inode_permission signature (${params.join(", ")})`, {
        object: "inode_permission",
        hint: "this kernel's inode_permission has a signature Hive does not know",
      });
    }
    const truncateId = lib.btf__find_by_name_kind(btf, "do_truncate", BTF_KIND_FUNC) as number;
    const truncateDentryArg = truncateId < 0 ? -1 : paramPointees(btf, truncateId).indexOf("dentry");
    if (truncateDentryArg !== 0 && truncateDentryArg !== 1) {
      throw new HiveError(
        "BtfMissing",
        "do_truncate is not in the kernel's BTF, or has an unknown signature",
        {
          object: "do_truncate",
          hint: "this kernel is not supported: do_truncate(…, struct dentry *, …) must exist and be traceable",
        },
      );
    }
    return { inodeArg, params, truncateDentryArg };
  } finally {
    lib.btf__free(btf);
  }
}

/** Offsets of the variables in one data section of an object's BTF (e.g. ".rodata"). */
export function datasecOffsets(btf: bigint, section: string): Map<string, { offset: number; size: number }> {
  const lib = libbpf();
  const id = lib.btf__find_by_name_kind(btf, section, BTF_KIND_DATASEC) as number;
  if (id < 0)
    throw new HiveError("BpfObjectMissing", `the BPF object has no ${section} section`, { object: section });
  const sec = readType(btf, id);
  const raw = entryWords(sec, 3); // btf_var_secinfo {type, offset, size}
  const out = new Map<string, { offset: number; size: number }>();
  for (let i = 0; i < sec.vlen; i++) {
    const v = readType(btf, raw[i * 3] ?? 0);
    if (v.kind !== BTF_KIND_VAR) continue;
    out.set(lib.btf__name_by_offset(btf, v.nameOff) as string, {
      offset: raw[i * 3 + 1] ?? 0,
      size: raw[i * 3 + 2] ?? 0,
    });
  }
  return out;
}

/** The overlay module's BTF, present while the module is loaded (5.11+ kernels with module BTF). */
export const OVERLAY_BTF = "/sys/kernel/btf/overlay";

/**
 * Where `__upperdentry` sits relative to `vfs_inode` in overlayfs's `struct ovl_inode`: the
 * program reads it from an overlay inode to tell an image layer's file from one written in the
 * container. Read here, as a file (no privilege: the module's BTF is world-readable, where CO-RE
 * against module types would need CAP_SYS_ADMIN to enumerate BTF objects). Without the module's
 * BTF (Debian 5.10, or overlay not loaded yet) the field follows `vfs_inode` directly, as it has
 * in every ovl_inode since 4.13: sizeof(struct inode). 0 when neither can be read: the program
 * then classifies no overlay file, and no allow entry holds for one.
 */
export function overlayUpperOffset(overlayBtf = OVERLAY_BTF): number {
  const lib = libbpf();
  const vmlinux = lib.btf__load_vmlinux_btf() as bigint | null;
  if (!vmlinux) return 0;
  try {
    // Built in (CONFIG_OVERLAY_FS=y): the type is in vmlinux's BTF.
    const builtIn = upperOffsetIn(vmlinux);
    if (builtIn !== undefined) return builtIn;
    if (existsSync(overlayBtf)) {
      const module = lib.btf__parse_split(overlayBtf, vmlinux) as bigint | null;
      if (module) {
        try {
          const inModule = upperOffsetIn(module);
          if (inModule !== undefined) return inModule;
        } finally {
          lib.btf__free(module);
        }
      }
    }
    const inode = lib.btf__find_by_name_kind(vmlinux, "inode", BTF_KIND_STRUCT) as number;
    return inode > 0 ? readType(vmlinux, inode).type : 0; // a struct's size is in the type word
  } finally {
    lib.btf__free(vmlinux);
  }
}

/** __upperdentry's offset from vfs_inode in `btf`'s struct ovl_inode (0: not both there); undefined without the type. */
function upperOffsetIn(btf: bigint): number | undefined {
  const id = libbpf().btf__find_by_name_kind(btf, "ovl_inode", BTF_KIND_STRUCT) as number;
  if (id <= 0) return undefined;
  const members = memberOffsets(btf, id);
  const vfs = members.get("vfs_inode");
  const upper = members.get("__upperdentry");
  return vfs !== undefined && upper !== undefined && upper > vfs ? upper - vfs : 0;
}

/** Byte offsets of a struct's members by name (btf_member {name_off, type, offset in bits}). */
function memberOffsets(btf: bigint, id: number): Map<string, number> {
  const lib = libbpf();
  const t = readType(btf, id);
  const kindFlag = (new Uint32Array(koffi.view(t.address, BTF_TYPE_SIZE).slice(0))[1] ?? 0) >>> 31;
  const raw = entryWords(t, 3);
  const out = new Map<string, number>();
  for (let i = 0; i < t.vlen; i++) {
    const bits = raw[i * 3 + 2] ?? 0;
    // With kind_flag set, the low 24 bits are the bit offset (the high 8, a bitfield's size).
    out.set(lib.btf__name_by_offset(btf, raw[i * 3] ?? 0) as string, (kindFlag ? bits & 0xffffff : bits) / 8);
  }
  return out;
}
