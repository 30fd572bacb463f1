/**
 * The one conversion from a user-space `stat` to the kernel's file identity. `stat(2)`
 * reports `st_dev` in glibc's encoding (major in bits 8–19 and 32–43, minor in bits 0–7
 * and 20–31); the kernel keeps `sb->s_dev` as MKDEV(major, minor) with a 12-bit major and
 * a 20-bit minor. The BPF program reads `s_dev`, so HiveData carries major and minor
 * separately and the loader rebuilds the kernel's value from them.
 */
import type { FileKey } from "./contract.ts";

export interface StatIdentity {
  dev: bigint | number;
  ino: bigint | number;
}

/** Splits a user-space dev_t into the kernel's major/minor (include/linux/kdev_t.h, new_decode_dev). */
export function decodeDevice(dev: bigint | number): { major: number; minor: number } {
  const d = BigInt(dev);
  const major = Number(((d >> 8n) & 0xfffn) | ((d >> 32n) & ~0xfffn));
  const minor = Number((d & 0xffn) | ((d >> 12n) & ~0xffn));
  return { major, minor };
}

/** The kernel's internal dev_t: MKDEV(major, minor) = major << 20 | minor. */
export function kernelDev(major: number, minor: number): number {
  return (((major & 0xfff) << 20) | (minor & 0xfffff)) >>> 0;
}

export function fileKeyFromStat(stat: StatIdentity): FileKey {
  const { major, minor } = decodeDevice(stat.dev);
  return { major, minor, ino: BigInt(stat.ino) };
}
