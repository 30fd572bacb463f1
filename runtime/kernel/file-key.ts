/**
 * File identities: struct hive_key (bpf/hive.h; checked against the object's BTF by
 * test/kernel/layout.test.ts), and the one place where device numbers are converted between
 * stat()'s st_dev encoding and the kernel's s_dev.
 */
import type { FileKey } from "./contract.ts";

/** Byte offsets, sizes: struct hive_key. */
export const KEY_LAYOUT = { size: 16, ino: 0, dev: 8 } as const;
/**
 * stat()'s st_dev (glibc/libuv encoding: major in bits 8–19 and 32–63, minor in bits 0–7
 * and 12–31) → the major/minor pair of the device.
 */
export function fileKeyFromStat(stat: { dev: number | bigint; ino: number | bigint }): FileKey {
  const dev = BigInt(stat.dev);
  const major = Number(((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn));
  const minor = Number((dev & 0xffn) | ((dev >> 12n) & ~0xffn & 0xffffffffn));
  return { major, minor, ino: BigInt(stat.ino) };
}

/** The kernel's internal dev_t (MKDEV: major << 20 | minor), as in super_block.s_dev. */
export function kernelDev(key: Pick<FileKey, "major" | "minor">): number {
  return ((key.major << 20) | (key.minor & 0xfffff)) >>> 0;
}

export function keyFromKernelDev(dev: number, ino: bigint): FileKey {
  return { major: dev >>> 20, minor: dev & 0xfffff, ino };
}

export function fileKeyId(key: FileKey): string {
  return `${key.major}:${key.minor}:${key.ino}`;
}

export function encodeKey(key: FileKey): Buffer {
  const buf = Buffer.alloc(KEY_LAYOUT.size);
  buf.writeBigUInt64LE(key.ino, KEY_LAYOUT.ino);
  buf.writeUInt32LE(kernelDev(key), KEY_LAYOUT.dev);
  return buf;
}

export function decodeKey(buf: Buffer): FileKey {
  return keyFromKernelDev(buf.readUInt32LE(KEY_LAYOUT.dev), buf.readBigUInt64LE(KEY_LAYOUT.ino));
}
