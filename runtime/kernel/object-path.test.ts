import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ARCHITECTURES } from "../../api/architecture.ts";
import { DEFAULT_OBJECT_PATH, objectPathFor } from "./object-path.ts";

const bpfDir = join(import.meta.dirname, "../../bpf");
const work = mkdtempSync(join(tmpdir(), "hive-bpf-build-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the compiled program, one object per architecture", () => {
  it("bpf/build.sh builds exactly the objects architecture.ts names, each a BPF ELF with BTF", () => {
    const src = join(work, "bpf");
    cpSync(bpfDir, src, { recursive: true, filter: (f) => !f.endsWith(".o") });
    execFileSync("sh", [join(src, "build.sh")], { stdio: "pipe" });
    const built = readdirSync(src).filter((f) => f.endsWith(".o"));
    expect(built.sort()).toEqual(
      Object.values(ARCHITECTURES)
        .map((a) => a.object)
        .sort(),
    );
    for (const object of built) {
      const elf = readFileSync(join(src, object));
      expect(elf.subarray(0, 4).toString("latin1")).toBe("\x7fELF");
      expect(elf.readUInt16LE(18)).toBe(247); // e_machine EM_BPF
      expect(elf.includes(".BTF")).toBe(true);
    }
    // The same source, different register offsets: the two objects are not the same program.
    const [a, b] = built.map((o) => readFileSync(join(src, o)));
    expect(a?.equals(b as Buffer)).toBe(false);
  });

  it("the loader's default is the object for this machine's architecture", () => {
    expect(objectPathFor("x64")).toBe(join(bpfDir, "hive.bpf.o"));
    expect(objectPathFor("arm64")).toBe(join(bpfDir, "hive.arm64.bpf.o"));
    expect(basename(DEFAULT_OBJECT_PATH)).toBe(
      ARCHITECTURES[process.arch as keyof typeof ARCHITECTURES]?.object ?? "hive.bpf.o",
    );
  });
});
