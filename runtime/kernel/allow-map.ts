/**
 * The kernel's allow map (hive_allow, bpf/allow.bpf.h): per watch slot and executable file, the
 * trap's allow entries as the kernel decides them, and the checks each entry let through. User
 * space writes the rules; the kernel only adds to the counts. A sync is a diff against the map as
 * it is (read once at open, since a restarted agent adopts the pinned map): a key whose rule is
 * unchanged is not written, so its counts go on; one whose rule changed is removed and written
 * anew. `take` hands out what the kernel allowed since the last take, removed keys included.
 */
import type { Logger } from "../log.ts";
import type { AllowedCount, AllowRule } from "./contract.ts";
import { keyFromKernelDev } from "./file-key.ts";
import {
  ALLOW_KEY_LAYOUT,
  ALLOW_LAYOUT,
  decodeAllowCounts,
  encodeAllowKey,
  encodeAllowRule,
} from "./layout.ts";
import { errnoError, type Libbpf } from "./libbpf-ffi.ts";

/** hive_allow's max_entries in bpf/allow.bpf.h. */
export const ALLOW_CAPACITY = 8192;

const idOf = (key: Buffer) => key.toString("hex");

export class AllowMap {
  private readonly lib: Libbpf;
  private readonly fd: number;
  private readonly logger: Logger | undefined;
  /** Key (hex) → the rule part of its value as last written or read (hex). */
  private readonly written = new Map<string, string>();
  /** Key (hex) → its counts as last taken. */
  private readonly reported = new Map<string, bigint[]>();
  /** What removed keys allowed after their last take. */
  private pending: AllowedCount[] = [];
  /** Keys the last sync could not write (a full map): their checks reach user space, which decides. */
  notWritten = 0;

  constructor(lib: Libbpf, fd: number, logger?: Logger) {
    this.lib = lib;
    this.fd = fd;
    this.logger = logger;
    // An adopted map's counts were the previous agent's to report: reported from here on.
    for (const [key, value] of this.read()) {
      this.written.set(idOf(key), ruleHex(value));
      this.reported.set(idOf(key), decodeAllowCounts(value));
    }
  }

  /**
   * Removes the keys `rules` does not have, and any whose rule changed (written again by `add`):
   * called before the watch map changes, so that no key outlives its slot's trap.
   */
  remove(rules: readonly AllowRule[]): void {
    const wanted = encodeRules(rules);
    for (const id of [...this.written.keys()]) {
      if (wanted.get(id)?.hex === this.written.get(id)) continue;
      const key = Buffer.from(id, "hex");
      const value = Buffer.alloc(ALLOW_LAYOUT.size);
      const found = (this.lib.bpf_map_lookup_elem(this.fd, key, value) as number) === 0;
      const rc = this.lib.bpf_map_delete_elem(this.fd, key) as number;
      if (rc !== 0 && rc !== -2) {
        this.warn(rc, "removing an allow key");
        continue;
      }
      // Checks allowed between this read and the delete are not counted (a few, at a policy change).
      if (found) this.taken(key, value, this.pending);
      this.written.delete(id);
      this.reported.delete(id);
    }
  }

  /** Writes the keys of `rules` not in the map: called after the watch map names their slots. */
  add(rules: readonly AllowRule[]): void {
    let failed = 0;
    for (const [id, { key, rule, hex }] of encodeRules(rules)) {
      if (this.written.get(id) === hex) continue;
      const rc = this.lib.bpf_map_update_elem(this.fd, key, rule, 0n) as number;
      if (rc === 0) this.written.set(id, hex);
      else {
        failed++;
        if (failed === 1) this.warn(rc, "writing an allow key");
      }
    }
    this.notWritten = failed;
  }

  /** What each key allowed since the last take (keys removed meanwhile included); none when nothing. */
  take(): AllowedCount[] {
    const out = this.pending;
    this.pending = [];
    for (const [key, value] of this.read()) this.taken(key, value, out);
    return out;
  }

  /** Adds the key's counts since its last take to `out`, and remembers them as taken. */
  private taken(key: Buffer, value: Buffer, out: AllowedCount[]): void {
    const id = idOf(key);
    const now = decodeAllowCounts(value);
    const before = this.reported.get(id);
    this.reported.set(id, now);
    const counts = now.map((n, i) => n - (before?.[i] ?? 0n));
    if (counts.some((n) => n > 0n))
      out.push({ slot: key.readUInt32LE(ALLOW_KEY_LAYOUT.slot), file: decodeAllowFile(key), counts });
  }

  private read(): Array<[Buffer, Buffer]> {
    const out: Array<[Buffer, Buffer]> = [];
    let key: Buffer | null = null;
    for (let i = 0; i <= ALLOW_CAPACITY; i++) {
      const next = Buffer.alloc(ALLOW_KEY_LAYOUT.size);
      if ((this.lib.bpf_map_get_next_key(this.fd, key, next) as number) !== 0) break;
      const value = Buffer.alloc(ALLOW_LAYOUT.size);
      if ((this.lib.bpf_map_lookup_elem(this.fd, next, value) as number) === 0) out.push([next, value]);
      key = next;
    }
    return out;
  }

  private warn(rc: number, what: string): void {
    // Not written: those checks reach user space, which decides them as before. Never thrown.
    this.logger?.warn(`${what} in the kernel failed; user space decides those accesses`, {
      error: errnoError(-rc, what, { object: "hive_allow" }),
    });
  }
}

function encodeRules(rules: readonly AllowRule[]): Map<string, { key: Buffer; rule: Buffer; hex: string }> {
  const out = new Map<string, { key: Buffer; rule: Buffer; hex: string }>();
  for (const r of rules) {
    const key = encodeAllowKey(r.slot, r.file);
    const rule = encodeAllowRule(r);
    out.set(idOf(key), { key, rule, hex: ruleHex(rule) });
  }
  return out;
}

function ruleHex(value: Buffer): string {
  return value.subarray(0, ALLOW_LAYOUT.allowed).toString("hex");
}

function decodeAllowFile(key: Buffer): AllowedCount["file"] {
  return keyFromKernelDev(key.readUInt32LE(ALLOW_KEY_LAYOUT.dev), key.readBigUInt64LE(ALLOW_KEY_LAYOUT.ino));
}
