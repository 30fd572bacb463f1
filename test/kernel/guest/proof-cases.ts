/**
 * Kernel cases for trap proofs (runtime/kernel/trap-proof.ts, bpf/prove.bpf.h hive_prove): run
 * inside the test VM by cases.ts. A trap is armed on the identity the kernel checks, which on an
 * overlay is not the one stat() reports; proving never raises an event.
 */
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, constants, cpSync, mkdirSync, openSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AccessKind } from "../../../api/meta.ts";
import { ResolvePool } from "../../../runtime/discover/resolve-pool.ts";
import { resolveInRoot } from "../../../runtime/discover/safe-path.ts";
import type { FileKey, KernelEvent } from "../../../runtime/kernel/contract.ts";
import { fileKeyFromStat, fileKeyId } from "../../../runtime/kernel/layout.ts";
import { proveWith } from "../../../runtime/kernel/trap-proof.ts";
import type { KernelCaseName } from "./case-names.ts";
import type { GuestHarness } from "./process-cases.ts";

type ProofCaseName = Extract<
  KernelCaseName,
  | "a trap is proven when armed: a file on an overlay is watched by the identity the kernel checks, and proving never alerts"
  | "in a root that is an overlay of layers on two filesystems, the agent's resolver threads arm lower and upper files as the kernel checks them"
  | "an image layer's file written through a container's overlay, before the container's own copy is armed, is judged as a write: a write-only trap fires on the append, not on a read; an overwrite is a write; a refused write just before an exec does not hide the exec"
>;

const ALL: AccessKind[] = ["read", "write", "exec", "append", "open"];
const forSlot = (list: KernelEvent[], slot: number) => list.filter((e) => e.slot === slot);

function cat(path: string): void {
  const result = spawnSync("cat", [path], { stdio: ["ignore", "ignore", "pipe"] });
  if (result.status !== 0) throw new Error(`cat ${path} failed: ${result.stderr}`);
}

/** `pinRoot`: where the suite's watcher pins its maps, which the agent's resolver proves with. */
export function proofCases(
  h: GuestHarness,
  pinRoot: string,
): Record<ProofCaseName, () => Promise<Record<string, unknown>>> {
  return {
    async "a trap is proven when armed: a file on an overlay is watched by the identity the kernel checks, and proving never alerts"() {
      const prove = proveWith(h.watcher().proofMaps());
      // A plain file (tmpfs): stat() names what the kernel checks, and the proof keeps it.
      const plain = h.file("proof-plain.txt");
      const plainStat = fileKeyFromStat(statSync(plain));
      const plainArmed = resolveInRoot("/", plain, {}, prove);
      assert.equal(fileKeyId(plainArmed.key), fileKeyId(plainStat));
      // The guest's root is an overlay (9p lower, tmpfs upper): for a file on it, stat() gives the
      // layer's inode under a device no check carries; armed on that, a read is never reported.
      const overlayDir = "/var/tmp/hive-proof";
      mkdirSync(overlayDir, { recursive: true });
      const onOverlay = join(overlayDir, "secret.txt");
      writeFileSync(onOverlay, "s3cret\n");
      chmodSync(onOverlay, 0o644);
      const stated = fileKeyFromStat(statSync(onOverlay));
      h.watcher().sync([{ key: stated, slot: 61, accesses: ALL, kind: "file" }]);
      const byStat = forSlot(await h.observe(() => void cat(onOverlay)), 61);
      let armed = resolveInRoot("/", onOverlay, {}, prove);
      h.watcher().sync([{ key: armed.key, slot: 61, accesses: ALL, kind: "file" }]);
      const byProof = forSlot(await h.observe(() => void cat(onOverlay)), 61);
      assert.equal(
        byProof.length,
        1,
        `a read of the proven identity: ${JSON.stringify(byProof, h.replacer)}`,
      );
      // Proving a file that is already watched (every re-resolution does) reports nothing.
      const whileProving = await h.observe(() => {
        armed = resolveInRoot("/", onOverlay, {}, prove);
      });
      assert.deepEqual(whileProving, [], `proving alerted: ${JSON.stringify(whileProving, h.replacer)}`);
      h.watcher().sync([]);
      return {
        statIdentity: fileKeyId(stated),
        provenIdentity: fileKeyId(armed.key),
        eventsWhenArmedByStat: byStat.length,
      };
    },

    async "in a root that is an overlay of layers on two filesystems, the agent's resolver threads arm lower and upper files as the kernel checks them"() {
      // A container root as an overlay snapshotter makes it: the image layer below (here on the
      // guest's own overlay root), the container's writable layer above (on tmpfs).
      const lower = "/var/tmp/hive-layers/lower";
      const top = join(h.dir, "layers");
      const merged = join(top, "merged");
      for (const d of [lower, join(top, "upper"), join(top, "work"), merged])
        mkdirSync(d, { recursive: true });
      writeFileSync(join(lower, "image.txt"), "from the image\n");
      execFileSync("mount", [
        "-t",
        "overlay",
        "overlay",
        "-o",
        `lowerdir=${lower},upperdir=${join(top, "upper")},workdir=${join(top, "work")}`,
        merged,
      ]);
      const pool = new ResolvePool({ proofPinRoot: pinRoot });
      try {
        writeFileSync(join(merged, "written.txt"), "by the container\n");
        const paths = ["/image.txt", "/written.txt"];
        const found = await Promise.all(
          pool.resolveAll(
            openSync(merged, constants.O_RDONLY | constants.O_DIRECTORY),
            paths.map((path) => ({ path })),
          ),
        );
        h.watcher().sync(
          found.map((f, i) => ({ key: f.key, slot: 70 + i, accesses: ALL, kind: "file" as const })),
        );
        const seen = await h.observe(() => {
          for (const path of paths) cat(join(merged, path));
        });
        h.watcher().sync([]);
        const identities = paths.map((path, i) => ({
          path,
          stat: fileKeyId(fileKeyFromStat(statSync(join(merged, path)))),
          armed: fileKeyId((found[i] as { key: FileKey }).key),
        }));
        for (const [i, path] of paths.entries())
          assert.equal(forSlot(seen, 70 + i).length, 1, `a read of ${path}: ${JSON.stringify(identities)}`);
        return { identities };
      } finally {
        await pool.close();
        execFileSync("umount", [merged]);
      }
    },

    async "an image layer's file written through a container's overlay, before the container's own copy is armed, is judged as a write: a write-only trap fires on the append, not on a read; an overwrite is a write; a refused write just before an exec does not hide the exec"() {
      // A container's root as containerd's overlayfs snapshotter makes it: the image layer and the
      // container's writable layer on one filesystem. Traps armed on the layer's files only, as
      // discover arms them before the container runs (an image layer's own entry: group == slot).
      const top = join(h.dir, "ovl-write");
      const [lower, upper, work, merged] = ["lower", "upper", "work", "merged"].map((d) => join(top, d)) as [
        string,
        string,
        string,
        string,
      ];
      for (const d of [lower, upper, work, merged]) mkdirSync(d, { recursive: true });
      writeFileSync(join(lower, "w.txt"), "from the image\n");
      writeFileSync(join(lower, "rw.txt"), "from the image\n");
      cpSync("/bin/true", join(lower, "tool"));
      chmodSync(join(lower, "tool"), 0o755);
      execFileSync("mount", [
        "-t",
        "overlay",
        "overlay",
        "-o",
        `lowerdir=${lower},upperdir=${upper},workdir=${work}`,
        merged,
      ]);
      try {
        const layerEntry = (name: string, slot: number, accesses: AccessKind[]) => ({
          ...h.entry(join(lower, name), slot, accesses),
          group: slot,
        });
        h.watcher().sync([
          layerEntry("w.txt", 80, ["write", "append"]),
          layerEntry("rw.txt", 81, ["read", "write"]),
          layerEntry("tool", 82, ["exec"]),
        ]);
        const read = await h.observe(() => {
          cat(join(merged, "w.txt"));
          cat(join(merged, "rw.txt"));
        });
        const written = await h.observe(() => {
          execFileSync("sh", [
            "-c",
            `echo more >> ${join(merged, "w.txt")}; echo other > ${join(merged, "rw.txt")}`,
          ]);
        });
        // A user who may not write the image's tool tries to (refused before the overlay looks at
        // the layer, so its write is noted and never judged), then runs it from the same thread.
        const refusedThenRun = await h.observe(() => {
          spawnSync("sh", ["-c", `true >> ${join(merged, "tool")}; exec ${join(merged, "tool")}`], {
            uid: 65534,
            gid: 65534,
            stdio: "ignore",
          });
        });
        h.watcher().sync([]);
        const kinds = (list: KernelEvent[], slot: number) =>
          forSlot(list, slot).map((e) => [...e.accesses].sort().join(","));
        const result = {
          readOfWriteTrap: kinds(read, 80),
          readOfReadTrap: kinds(read, 81),
          append: kinds(written, 80),
          overwrite: kinds(written, 81),
          execAfterRefusedWrite: kinds(refusedThenRun, 82).length,
        };
        // The layer's check keeps its own kinds too (read: the overlay reads the file to copy it up).
        assert.deepEqual(result, {
          readOfWriteTrap: [],
          readOfReadTrap: ["open,read"],
          append: ["append,open,read,write"],
          overwrite: ["open,read,write"],
          execAfterRefusedWrite: 1,
        });
        return result;
      } finally {
        execFileSync("umount", [merged]);
      }
    },
  };
}
