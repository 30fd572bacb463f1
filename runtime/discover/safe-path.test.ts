import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type HiveError, isHiveError } from "../../api/errors.ts";
import { fileKeyFromStat } from "../kernel/layout.ts";
import { MAX_PATH_COMPONENTS, resolveInRoot } from "./safe-path.ts";

let base: string;
let root: string;
let host: string;

beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), "hive-safe-path-"));
  root = join(base, "root");
  host = join(base, "host");
  mkdirSync(join(root, "etc"), { recursive: true });
  mkdirSync(host);
  writeFileSync(join(root, "etc", "shadow"), "container secret\n");
  writeFileSync(join(host, "shadow"), "host secret\n");
});

afterEach(() => rmSync(base, { recursive: true, force: true }));

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (isHiveError(error)) return error.code;
    throw error;
  }
  return "resolved";
}

describe("resolveInRoot", () => {
  it("reports the device and inode of a file inside the root, and its parent directory", () => {
    const got = resolveInRoot(root, "/etc/shadow");
    expect(got.key).toEqual(fileKeyFromStat(statSync(join(root, "etc", "shadow"), { bigint: true })));
    expect(got.parent).toEqual(fileKeyFromStat(statSync(join(root, "etc"), { bigint: true })));
    expect(got.created).toBe(false);
    expect(got.fileType).toBe("file");
  });

  it("re-roots an absolute symlink to a host file instead of following it to the host", () => {
    rmSync(join(root, "etc", "shadow"));
    symlinkSync(join(host, "shadow"), join(root, "etc", "shadow"));
    expect(code(() => resolveInRoot(root, "/etc/shadow"))).toBe("PathEscapesContainer");
    // The same absolute path exists inside the root: that file, not the host's, is the answer.
    mkdirSync(join(root, host), { recursive: true });
    writeFileSync(join(root, host, "shadow"), "inside\n");
    const got = resolveInRoot(root, "/etc/shadow");
    expect(got.key.ino).toBe(statSync(join(root, host, "shadow"), { bigint: true }).ino);
    expect(got.key.ino).not.toBe(statSync(join(host, "shadow"), { bigint: true }).ino);
  });

  it("clamps .. at the container root", () => {
    symlinkSync("../../../../../../etc/shadow", join(root, "etc", "link"));
    const got = resolveInRoot(root, "/etc/link");
    expect(got.key.ino).toBe(statSync(join(root, "etc", "shadow"), { bigint: true }).ino);
    expect(got.resolvedPath).toBe("/etc/shadow");
  });

  it("re-roots an absolute symlink in the middle of the path", () => {
    symlinkSync(host, join(root, "h"));
    expect(code(() => resolveInRoot(root, "/h/shadow"))).toBe("PathEscapesContainer");
    symlinkSync("/etc", join(root, "e"));
    expect(resolveInRoot(root, "/e/shadow").key.ino).toBe(
      statSync(join(root, "etc", "shadow"), { bigint: true }).ino,
    );
  });

  it("stops at a symlink loop", () => {
    symlinkSync("/b", join(root, "a"));
    symlinkSync("/a", join(root, "b"));
    expect(code(() => resolveInRoot(root, "/a"))).toBe("PathInvalid");
  });

  it("reports a missing file and a file used as a directory", () => {
    expect(code(() => resolveInRoot(root, "/etc/missing"))).toBe("FileNotFound");
    expect(code(() => resolveInRoot(root, "/etc/shadow/x"))).toBe("FileNotFound");
    expect(code(() => resolveInRoot(join(base, "no-such-root"), "/etc/shadow"))).toBe("ContainerNotFound");
  });

  it("creates a missing file inside the root with the requested mode, whatever the umask", () => {
    const old = process.umask(0o077);
    try {
      const got = resolveInRoot(root, "/etc/new-secret", { create: true, mode: 0o644 });
      const st = statSync(join(root, "etc", "new-secret"), { bigint: true });
      expect(got.created).toBe(true);
      expect(got.key.ino).toBe(st.ino);
      expect(Number(st.mode) & 0o7777).toBe(0o644);
    } finally {
      process.umask(old);
    }
  });

  it("creates through a dangling absolute symlink inside the root, never at the host path", () => {
    const hostTarget = join(host, "planted");
    symlinkSync(hostTarget, join(root, "etc", "planted"));
    mkdirSync(join(root, host), { recursive: true });
    const got = resolveInRoot(root, "/etc/planted", { create: true, mode: 0o400 });
    expect(existsSync(hostTarget)).toBe(false);
    const inside = statSync(join(root, hostTarget), { bigint: true });
    expect(got.key.ino).toBe(inside.ino);
    expect(Number(inside.mode) & 0o7777).toBe(0o400);
  });

  it("does not chmod or touch an existing host file reached by a symlink, even with create: true", () => {
    chmodSync(join(host, "shadow"), 0o600);
    const before = lstatSync(join(host, "shadow"), { bigint: true });
    rmSync(join(root, "etc", "shadow"));
    symlinkSync(join(host, "shadow"), join(root, "etc", "shadow"));
    expect(code(() => resolveInRoot(root, "/etc/shadow"))).toBe("PathEscapesContainer");
    // With create: true the file is made at the re-rooted path, inside the root.
    const got = resolveInRoot(root, "/etc/shadow", { create: true, mode: 0o777 });
    expect(got.key.ino).toBe(statSync(join(root, host, "shadow"), { bigint: true }).ino);
    expect(got.key.ino).not.toBe(before.ino);
    const after = lstatSync(join(host, "shadow"), { bigint: true });
    expect(after.mode).toBe(before.mode);
    expect(after.ctimeNs).toBe(before.ctimeNs);
    expect(after.atimeNs).toBe(before.atimeNs);
  });

  it("never resolves to a file outside the root, for any arrangement of symlinks", () => {
    // Host-side decoys with the same names as everything the symlinks may point at.
    const names = ["a", "b", "c", "etc", "shadow"];
    const target = fc.oneof(
      fc.constantFrom(...names),
      fc.array(fc.constantFrom(...names, "..", "."), { minLength: 1, maxLength: 6 }).map((p) => p.join("/")),
      fc.array(fc.constantFrom(...names, ".."), { minLength: 1, maxLength: 6 }).map((p) => `/${p.join("/")}`),
      fc.constantFrom(host, `${host}/shadow`, base, "/", "/proc/self/root/etc/passwd"),
    );
    let round = 0;
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom(...names), target), { minLength: 1, maxLength: 6 }),
        fc.array(fc.constantFrom(...names), { minLength: 1, maxLength: 4 }),
        fc.boolean(),
        (links, query, create) => {
          const r = join(base, `r${round++}`);
          mkdirSync(join(r, "etc"), { recursive: true });
          writeFileSync(join(r, "etc", "shadow"), "x");
          const decoyInodes = new Set<bigint>();
          for (const n of names) {
            const p = join(host, n);
            if (!existsSync(p)) writeFileSync(p, "decoy");
            decoyInodes.add(statSync(p, { bigint: true }).ino);
          }
          decoyInodes.add(statSync("/etc/passwd", { bigint: true }).ino);
          decoyInodes.add(statSync(host, { bigint: true }).ino);
          for (const [name, to] of links) {
            try {
              symlinkSync(to, join(r, name));
            } catch {
              // name taken by an earlier link: the arrangement is still valid
            }
          }
          const hostBefore = new Map(
            names.map((n) => [n, lstatSync(join(host, n), { bigint: true }).ctimeNs]),
          );
          try {
            const got = resolveInRoot(r, `/${query.join("/")}`, { create, mode: 0o600 });
            const hostDev = statSync(host, { bigint: true }).dev;
            if (BigInt(got.key.major) === BigInt(fileKeyFromStat({ dev: hostDev, ino: 0 }).major)) {
              expect(decoyInodes.has(got.key.ino)).toBe(false);
            }
          } catch (error) {
            if (!isHiveError(error)) throw error;
          }
          for (const n of names)
            expect(lstatSync(join(host, n), { bigint: true }).ctimeNs).toBe(hostBefore.get(n));
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe("resolveInRoot creating directories", () => {
  it("creates missing directories inside the root, never through a symlink to the host", () => {
    const got = resolveInRoot(root, "/var/lib/hive/trap", { create: true, mode: 0o600 });
    expect(got.key.ino).toBe(statSync(join(root, "var/lib/hive/trap"), { bigint: true }).ino);
    expect(statSync(join(root, "var/lib")).mode & 0o777).toBe(0o755);
    symlinkSync(join(host, "sub"), join(root, "planted-dir"));
    resolveInRoot(root, "/planted-dir/x", { create: true });
    expect(existsSync(join(host, "sub"))).toBe(false);
    expect(existsSync(join(root, host, "sub", "x"))).toBe(true);
  });
});

describe("resolveInRoot bounds", () => {
  /** `/d/d/…/d` `depth` deep, holding `secret` and `links` symlinks each leading back down to the next (absolute). */
  function maze(links: number, depth = 2000): { trap: string; deep: string } {
    const deep = Array(depth).fill("d").join("/");
    mkdirSync(join(root, deep), { recursive: true });
    writeFileSync(join(root, deep, "secret"), "x");
    for (let i = 1; i <= links; i++)
      symlinkSync(i === links ? `/${deep}/secret` : `/${deep}/l${i + 1}`, join(root, deep, `l${i}`));
    return { trap: `/${deep}/l1`, deep };
  }
  const openFds = () => readdirSync("/proc/self/fd").length;

  it("refuses a symlink maze past the component bound, naming the trap and the bound, without running out of descriptors", () => {
    const { trap } = maze(40);
    const before = openFds();
    let error: unknown;
    try {
      resolveInRoot(root, trap);
    } catch (e) {
      error = e;
    }
    expect(isHiveError(error, "PathInvalid")).toBe(true);
    expect((error as HiveError).object).toBe(trap);
    expect((error as HiveError).message).toContain(String(MAX_PATH_COMPONENTS));
    expect((error as HiveError).message).not.toContain("EMFILE");
    expect(openFds()).toBe(before);
  });

  it("resolves a 2,000-deep path through a symlink within the bound", () => {
    const { trap, deep } = maze(1);
    const got = resolveInRoot(root, trap);
    expect(got.key.ino).toBe(statSync(join(root, deep, "secret"), { bigint: true }).ino);
    expect(got.resolvedPath).toBe(`/${deep}/secret`);
  });

  it("walks .. back through directories it no longer holds open", () => {
    const { deep } = maze(1, 50);
    symlinkSync(`${Array(50).fill("..").join("/")}/etc/shadow`, join(root, deep, "up"));
    const got = resolveInRoot(root, `/${deep}/up`);
    expect(got.key.ino).toBe(statSync(join(root, "etc", "shadow"), { bigint: true }).ino);
    expect(got.resolvedPath).toBe("/etc/shadow");
  });

  it("stops after the symlink bound even when the components fit", () => {
    for (let i = 0; i < 45; i++) symlinkSync(`/l${i + 1}`, join(root, `l${i}`));
    symlinkSync("/etc/shadow", join(root, "l45"));
    expect(() => resolveInRoot(root, "/l0")).toThrow(/more than 40 symlinks/);
    expect(resolveInRoot(root, "/l10").resolvedPath).toBe("/etc/shadow");
  });
});
