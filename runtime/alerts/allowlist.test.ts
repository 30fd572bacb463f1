import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { AllowMissReason } from "../../api/alert.ts";
import { ACCESS_KINDS, type AccessKind } from "../../api/meta.ts";
import type { AllowEntry } from "../../api/policy.ts";
import {
  IMAGE_DEVICE,
  imageFile,
  imageFiles,
  imageProcess,
  imageProvenance,
} from "../../test/alerts/fixtures.ts";
import type { ExecIdentity, ExecProvenance, ProcessIdentity } from "../kernel/contract.ts";
import {
  type AllowScope,
  type AllowSubject,
  allowDecision,
  allowingEntry,
  describeEntry,
  entryMiss,
  exactAllowPaths,
  pathMatches,
} from "./allowlist.ts";

type Parent = NonNullable<ProcessIdentity["parent"]>;

/**
 * An honest access: the image's `exe`, forked by the image's `parent`. The pieces are returned
 * so that each test can change the one thing it is about.
 */
function honest(exe = "/usr/sbin/sshd", parent = "/bin/sh", accesses: AccessKind[] = ["read"]) {
  const process = imageProcess(exe, parent);
  const parentSide = process.parent as Parent;
  return {
    subject: { accesses, process } satisfies AllowSubject,
    process,
    provenance: process.provenance as ExecProvenance,
    parent: parentSide,
    parentProvenance: parentSide.provenance as ExecProvenance,
  };
}

const IMAGE_PATHS = [
  "/usr/sbin/sshd",
  "/usr/sbin/unix_chkpwd",
  "/usr/bin/passwd",
  "/usr/sbin/cron",
  "/bin/sh",
  "/usr/bin/cat",
];
/** The container's files at the entries' exact paths, as discover found them. */
const SCOPE: AllowScope = { files: imageFiles(IMAGE_PATHS) };

const SSHD: AllowEntry = { exe: "/usr/sbin/sshd" };
const CRON_CHILD: AllowEntry = { "parent-exe": "/usr/sbin/cron" };

const SHADOW: AllowEntry[] = [
  SSHD,
  { exe: "/usr/sbin/unix_chkpwd" },
  { exe: "/usr/bin/passwd", accesses: ["read", "write"] },
  CRON_CHILD,
];

const exeMiss = (reason: AllowMissReason) => ({ field: "exe", reason });
const parentMiss = (reason: AllowMissReason) => ({ field: "parent-exe", reason });

describe("exe patterns", () => {
  it("match the exact kernel-resolved path, and not a copy of the binary elsewhere", () => {
    expect(pathMatches("/usr/sbin/sshd", "/usr/sbin/sshd")).toBe(true);
    expect(pathMatches("/usr/sbin/sshd", "/tmp/sshd")).toBe(false);
    expect(pathMatches("/usr/sbin/sshd", "/usr/sbin/sshd2")).toBe(false);
    expect(pathMatches("/usr/sbin/sshd", "/usr/sbin/ssh")).toBe(false);
    expect(pathMatches("/usr/sbin/sshd", "/var/lib/x/usr/sbin/sshd")).toBe(false);
  });

  it("match a prefix only with a trailing *", () => {
    expect(pathMatches("/usr/lib/openssh/*", "/usr/lib/openssh/sftp-server")).toBe(true);
    expect(pathMatches("/usr/lib/openssh/*", "/usr/lib/openssh/deeper/helper")).toBe(true);
    expect(pathMatches("/usr/lib/openssh/*", "/usr/lib/openssh-evil/x")).toBe(false);
    expect(pathMatches("/usr/bin/python3*", "/usr/bin/python3.11")).toBe(true);
    expect(pathMatches("/usr/bin/python3*", "/usr/bin/python")).toBe(false);
  });

  it("match nothing when the pattern is one validation refuses", () => {
    expect(pathMatches("sshd", "sshd")).toBe(false);
    expect(pathMatches("/usr/*/sshd", "/usr/*/sshd")).toBe(false);
    expect(pathMatches("/usr/*/sshd", "/usr/sbin/sshd")).toBe(false);
    expect(pathMatches("*", "/usr/sbin/sshd")).toBe(false);
  });

  it("agree with the schema's pattern: a valid pattern without * matches only itself", () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom("usr", "sbin", "sshd", "a", "*", ".", ".."), { minLength: 1, maxLength: 4 }),
        fc.array(fc.constantFrom("usr", "sbin", "sshd", "a", "*"), { minLength: 1, maxLength: 4 }),
        (p, e) => {
          const pattern = `/${p.join("/")}`;
          const exe = `/${e.join("/")}`;
          const valid = /^\/[^*]*[*]?$/.test(pattern);
          const expected = !valid
            ? false
            : pattern.endsWith("*")
              ? exe.startsWith(pattern.slice(0, -1))
              : exe === pattern;
          expect(pathMatches(pattern, exe)).toBe(expected);
        },
      ),
    );
  });
});

describe("an exe entry", () => {
  it("holds for the image's file at its exact path, run as the image shipped it", () => {
    expect(entryMiss(SSHD, honest().subject, SCOPE)).toBeUndefined();
    expect(entryMiss({ exe: "/usr/sbin/*" }, honest().subject, SCOPE)).toBeUndefined();
  });

  it("holds for a `*` pattern on the image's file without asking where discover found it", () => {
    const sftp = honest("/usr/lib/openssh/sftp-server").subject;
    expect(entryMiss({ exe: "/usr/lib/openssh/*" }, sftp, SCOPE)).toBeUndefined();
    expect(entryMiss({ exe: "/usr/lib/openssh/*" }, sftp, {})).toBeUndefined();
    expect(entryMiss({ exe: "/usr/lib/openssh/sftp-server" }, sftp, SCOPE)).toEqual(exeMiss("not-resolved"));
  });

  it("unknown-process: the kernel did not know the process, or knew no path for it", () => {
    const unknown = honest();
    unknown.process.exe = { source: "unknown" };
    expect(entryMiss(SSHD, unknown.subject, SCOPE)).toEqual(exeMiss("unknown-process"));
    const named = honest();
    named.process.exe = { exe: "/usr/sbin/sshd", source: "unknown" };
    expect(entryMiss(SSHD, named.subject, SCOPE)).toEqual(exeMiss("unknown-process"));
    const pathless = honest();
    pathless.process.exe = { source: "exec" };
    expect(entryMiss({ exe: "/*" }, pathless.subject, SCOPE)).toEqual(exeMiss("unknown-process"));
    expect(entryMiss(SSHD, { accesses: ["read"] }, SCOPE)).toEqual(exeMiss("unknown-process"));
  });

  it("seeded: a process that predates the program, whatever its path", () => {
    const seeded = honest();
    seeded.process.exe = { exe: "/usr/sbin/sshd", source: "seed" };
    expect(entryMiss(SSHD, seeded.subject, SCOPE)).toEqual(exeMiss("seeded"));
    expect(entryMiss({ exe: "/*" }, seeded.subject, SCOPE)).toEqual(exeMiss("seeded"));
  });

  it("path-truncated: the kernel kept only the path's end", () => {
    const long = honest();
    long.process.exe = { exe: "/usr/sbin/sshd", source: "exec", truncated: true };
    expect(entryMiss(SSHD, long.subject, SCOPE)).toEqual(exeMiss("path-truncated"));
    expect(entryMiss({ exe: "/*" }, long.subject, SCOPE)).toEqual(exeMiss("path-truncated"));
  });

  it("other-executable: another path (a copy elsewhere, a longer name, a prefix lookalike)", () => {
    for (const path of ["/tmp/sshd", "/usr/sbin/sshd2", "/usr/sbin/ssh", "/var/lib/x/usr/sbin/sshd"])
      expect(entryMiss(SSHD, honest(path).subject, SCOPE)).toEqual(exeMiss("other-executable"));
    const lookalike = honest("/usr/lib/openssh-evil/x").subject;
    expect(entryMiss({ exe: "/usr/lib/openssh/*" }, lookalike, SCOPE)).toEqual(exeMiss("other-executable"));
    const relative = honest();
    relative.process.exe = { exe: "sshd", source: "exec" };
    expect(entryMiss({ exe: "/*" }, relative.subject, SCOPE)).toEqual(exeMiss("other-executable"));
    expect(entryMiss({ exe: "sshd" }, relative.subject, SCOPE)).toEqual(exeMiss("other-executable"));
    expect(entryMiss({ exe: "/usr/*/sshd" }, honest().subject, SCOPE)).toEqual(exeMiss("other-executable"));
  });

  it("other-executable: an entry naming no executable never holds", () => {
    expect(entryMiss({}, honest().subject, SCOPE)).toEqual(exeMiss("other-executable"));
    expect(entryMiss({ accesses: ["read"] }, honest().subject, SCOPE)).toEqual(exeMiss("other-executable"));
  });

  it("written-in-container: the path's file was written or changed in the container", () => {
    const written = honest();
    written.provenance.layer = "container";
    expect(entryMiss(SSHD, written.subject, SCOPE)).toEqual(exeMiss("written-in-container"));
    expect(entryMiss({ exe: "/usr/sbin/*" }, written.subject, SCOPE)).toEqual(
      exeMiss("written-in-container"),
    );
  });

  it("unlinked: a memfd or a file deleted since", () => {
    const memfd = honest();
    memfd.provenance.layer = "unlinked";
    expect(entryMiss(SSHD, memfd.subject, SCOPE)).toEqual(exeMiss("unlinked"));
  });

  it("not-from-image: another filesystem (a volume), or no provenance recorded", () => {
    const volume = honest();
    volume.provenance.layer = "other";
    expect(entryMiss(SSHD, volume.subject, SCOPE)).toEqual(exeMiss("not-from-image"));
    expect(entryMiss({ exe: "/usr/sbin/*" }, volume.subject, SCOPE)).toEqual(exeMiss("not-from-image"));
    const unrecorded = honest();
    unrecorded.process.provenance = undefined;
    expect(entryMiss(SSHD, unrecorded.subject, SCOPE)).toEqual(exeMiss("not-from-image"));
    expect(entryMiss({ exe: "/usr/sbin/*" }, unrecorded.subject, SCOPE)).toEqual(exeMiss("not-from-image"));
  });

  it("not-resolved: discover found no file at the entry's exact path", () => {
    const { subject } = honest();
    expect(entryMiss(SSHD, subject, {})).toEqual(exeMiss("not-resolved"));
    expect(entryMiss(SSHD, subject, { files: imageFiles(["/usr/sbin/cron"]) })).toEqual(
      exeMiss("not-resolved"),
    );
    expect(entryMiss(SSHD, subject, { files: new Map([["/usr/sbin/sshd", []]]) })).toEqual(
      exeMiss("not-resolved"),
    );
    expect(entryMiss(SSHD, subject)).toEqual(exeMiss("not-resolved"));
  });

  it("not-the-image-file: another inode, or the same inode on another device, than discover found", () => {
    const other = honest();
    other.provenance.file = { ...other.provenance.file, ino: other.provenance.file.ino + 1n };
    expect(entryMiss(SSHD, other.subject, SCOPE)).toEqual(exeMiss("not-the-image-file"));
    const device = honest();
    device.provenance.file = { ...device.provenance.file, minor: 41 };
    device.process.rootDev = { major: 0, minor: 41 };
    expect(entryMiss(SSHD, device.subject, SCOPE)).toEqual(exeMiss("not-the-image-file"));
    // Any of the identities discover found at the path will do (an overlay's and a layer's).
    const layer = { major: 8, minor: 1, ino: 77n };
    const scope = { files: new Map([["/usr/sbin/sshd", [layer, imageFile("/usr/sbin/sshd")]]]) };
    expect(entryMiss(SSHD, honest().subject, scope)).toBeUndefined();
  });

  it("loader-env: a dynamic-loader variable was set at exec", () => {
    const preload = honest();
    preload.provenance.loaderEnv = ["LD_PRELOAD"];
    expect(entryMiss(SSHD, preload.subject, SCOPE)).toEqual(exeMiss("loader-env"));
    expect(entryMiss({ exe: "/usr/sbin/*" }, preload.subject, SCOPE)).toEqual(exeMiss("loader-env"));
  });

  it("env-unread: the environment at exec was not read whole", () => {
    const unread = honest();
    unread.provenance.envUnread = true;
    expect(entryMiss(SSHD, unread.subject, SCOPE)).toEqual(exeMiss("env-unread"));
  });

  it("traced: ptraced at its exec or since", () => {
    const traced = honest();
    traced.provenance.traced = true;
    expect(entryMiss(SSHD, traced.subject, SCOPE)).toEqual(exeMiss("traced"));
  });

  it("chroot: the process's root is not its container's, and unknown counts as chrooted", () => {
    const chrooted = honest();
    chrooted.process.chroot = true;
    expect(entryMiss(SSHD, chrooted.subject, SCOPE)).toEqual(exeMiss("chroot"));
    const unknown = honest();
    unknown.process.chroot = undefined;
    expect(entryMiss(SSHD, unknown.subject, SCOPE)).toEqual(exeMiss("chroot"));
  });

  it("other-root: the process's root is on another filesystem than the executable", () => {
    const elsewhere = honest();
    elsewhere.process.rootDev = { major: 0, minor: 41 };
    expect(entryMiss(SSHD, elsewhere.subject, SCOPE)).toEqual(exeMiss("other-root"));
    const major = honest();
    major.process.rootDev = { major: 8, minor: IMAGE_DEVICE.minor };
    expect(entryMiss(SSHD, major.subject, SCOPE)).toEqual(exeMiss("other-root"));
  });

  it("reports the first unmet condition only", () => {
    const everything = honest("/tmp/sshd");
    everything.provenance.layer = "container";
    everything.provenance.traced = true;
    everything.process.chroot = true;
    expect(entryMiss(SSHD, everything.subject, SCOPE)).toEqual(exeMiss("other-executable"));
    const layered = honest();
    layered.provenance.layer = "unlinked";
    layered.provenance.loaderEnv = ["LD_AUDIT"];
    expect(entryMiss(SSHD, layered.subject, {})).toEqual(exeMiss("unlinked"));
  });
});

describe("a parent-exe entry", () => {
  const cronChild = () => honest("/usr/bin/cat", "/usr/sbin/cron");

  it("holds for a child of the image's cron that forked it and runs it still", () => {
    expect(entryMiss(CRON_CHILD, cronChild().subject, SCOPE)).toBeUndefined();
    expect(entryMiss({ "parent-exe": "/usr/sbin/*" }, cronChild().subject, SCOPE)).toBeUndefined();
  });

  it("checks the parent as an exe entry checks the process", () => {
    const cron = imageProvenance("/usr/sbin/cron");
    const cases: [Partial<Parent>, AllowMissReason][] = [
      [{ exe: { source: "unknown" } }, "unknown-process"],
      [{ exe: { exe: "/usr/sbin/cron", source: "seed" } }, "seeded"],
      [{ exe: { exe: "/usr/sbin/cron", source: "exec", truncated: true } }, "path-truncated"],
      [{ exe: { exe: "/tmp/cron", source: "exec" } }, "other-executable"],
      [{ exe: { exe: "/usr/sbin/cron2", source: "exec" } }, "other-executable"],
      [{ provenance: { ...cron, layer: "container" } }, "written-in-container"],
      [{ provenance: { ...cron, layer: "unlinked" } }, "unlinked"],
      [{ provenance: { ...cron, layer: "other" } }, "not-from-image"],
      [{ provenance: undefined }, "not-from-image"],
      [{ provenance: { ...cron, file: { ...cron.file, ino: 1n } } }, "not-the-image-file"],
      [{ provenance: { ...cron, file: { ...cron.file, major: 8 } } }, "not-the-image-file"],
      [{ provenance: { ...cron, loaderEnv: ["LD_LIBRARY_PATH"] } }, "loader-env"],
      [{ provenance: { ...cron, envUnread: true } }, "env-unread"],
      [{ provenance: { ...cron, traced: true } }, "traced"],
      [{ chroot: true }, "chroot"],
      [{ chroot: undefined }, "chroot"],
    ];
    for (const [change, reason] of cases) {
      const s = cronChild();
      Object.assign(s.parent, change);
      expect({ change, miss: entryMiss(CRON_CHILD, s.subject, SCOPE) }).toEqual({
        change,
        miss: parentMiss(reason),
      });
    }
    const orphan = cronChild();
    orphan.process.parent = undefined;
    expect(entryMiss(CRON_CHILD, orphan.subject, SCOPE)).toEqual(parentMiss("unknown-process"));
    expect(entryMiss(CRON_CHILD, cronChild().subject, {})).toEqual(parentMiss("not-resolved"));
    expect(entryMiss(CRON_CHILD, { accesses: ["read"] }, SCOPE)).toEqual(parentMiss("unknown-process"));
  });

  it("fork-unseen: who forked the process is unknown (or nothing was recorded of it)", () => {
    const unseen = cronChild();
    unseen.provenance.forkUnseen = true;
    expect(entryMiss(CRON_CHILD, unseen.subject, SCOPE)).toEqual(parentMiss("fork-unseen"));
    const unrecorded = cronChild();
    unrecorded.process.provenance = undefined;
    expect(entryMiss(CRON_CHILD, unrecorded.subject, SCOPE)).toEqual(parentMiss("fork-unseen"));
  });

  it("reparented: the parent adopted the process (or nobody knows it did not)", () => {
    const adopted = cronChild();
    adopted.parent.reparented = true;
    expect(entryMiss(CRON_CHILD, adopted.subject, SCOPE)).toEqual(parentMiss("reparented"));
    const unknown = cronChild();
    unknown.parent.reparented = undefined;
    expect(entryMiss(CRON_CHILD, unknown.subject, SCOPE)).toEqual(parentMiss("reparented"));
  });

  it("parent-execed: the parent ran another executable since it forked the process", () => {
    const execed = cronChild();
    execed.parent.execedSinceFork = true;
    expect(entryMiss(CRON_CHILD, execed.subject, SCOPE)).toEqual(parentMiss("parent-execed"));
    const unknown = cronChild();
    unknown.parent.execedSinceFork = undefined;
    expect(entryMiss(CRON_CHILD, unknown.subject, SCOPE)).toEqual(parentMiss("parent-execed"));
  });

  it("does not ask the accessing process to be the image's", () => {
    const dropped = cronChild();
    dropped.provenance.layer = "container";
    dropped.provenance.loaderEnv = ["LD_PRELOAD"];
    expect(entryMiss(CRON_CHILD, dropped.subject, SCOPE)).toBeUndefined();
  });
});

describe("the entry's fields together", () => {
  it("need every field the entry has to hold, and report the first that does not", () => {
    const entry: AllowEntry = {
      exe: "/usr/lib/openssh/*",
      "parent-exe": "/usr/sbin/sshd",
      accesses: ["read"],
    };
    const sftp = (parent: string, accesses: AccessKind[] = ["read"]) =>
      honest("/usr/lib/openssh/sftp-server", parent, accesses).subject;
    expect(entryMiss(entry, sftp("/usr/sbin/sshd"), SCOPE)).toBeUndefined();
    expect(entryMiss(entry, sftp("/bin/bash"), SCOPE)).toEqual(parentMiss("other-executable"));
    expect(entryMiss(entry, honest("/usr/bin/cat", "/usr/sbin/sshd").subject, SCOPE)).toEqual(
      exeMiss("other-executable"),
    );
    expect(entryMiss(entry, sftp("/usr/sbin/sshd", ["write"]), SCOPE)).toEqual({
      field: "accesses",
      reason: "accesses",
    });
    expect(entryMiss(entry, honest("/usr/bin/cat", "/bin/bash", ["write"]).subject, SCOPE)).toEqual(
      exeMiss("other-executable"),
    );
  });

  it("accesses: every kind of the access must be among the entry's", () => {
    const passwd = SHADOW[2] as AllowEntry;
    const at = (accesses: AccessKind[]) =>
      entryMiss(passwd, honest("/usr/bin/passwd", "/bin/sh", accesses).subject, SCOPE);
    expect(at(["read"])).toBeUndefined();
    expect(at(["write"])).toBeUndefined();
    expect(at(["read", "write"])).toBeUndefined();
    const refused = { field: "accesses", reason: "accesses" };
    expect(at(["read", "open"])).toEqual(refused);
    expect(at(["exec"])).toEqual(refused);
    // No decoded kind is within no list: only an entry without `accesses` allows it.
    expect(at([])).toEqual(refused);
    const any = { exe: "/usr/bin/passwd" };
    expect(entryMiss(any, honest("/usr/bin/passwd", "/bin/sh", []).subject, SCOPE)).toBeUndefined();
    for (const kind of ACCESS_KINDS)
      expect(entryMiss(any, honest("/usr/bin/passwd", "/bin/sh", [kind]).subject, SCOPE)).toBeUndefined();
  });
});

describe("a host scope (standalone `hive watch` of a host path)", () => {
  const HOST: AllowScope = { files: SCOPE.files, host: true };

  it("accepts the host's own files, on whatever filesystem", () => {
    const host = honest();
    host.provenance.layer = "other";
    expect(entryMiss(SSHD, host.subject, HOST)).toBeUndefined();
    expect(entryMiss({ exe: "/usr/sbin/*" }, host.subject, HOST)).toBeUndefined();
    expect(entryMiss(SSHD, honest().subject, HOST)).toBeUndefined();
    expect(entryMiss(SSHD, host.subject, { ...HOST, host: false })).toEqual(exeMiss("not-from-image"));
  });

  it("still refuses a written or unlinked file, and checks everything else", () => {
    const written = honest();
    written.provenance.layer = "container";
    expect(entryMiss(SSHD, written.subject, HOST)).toEqual(exeMiss("written-in-container"));
    const memfd = honest();
    memfd.provenance.layer = "unlinked";
    expect(entryMiss(SSHD, memfd.subject, HOST)).toEqual(exeMiss("unlinked"));
    const unrecorded = honest();
    unrecorded.process.provenance = undefined;
    expect(entryMiss(SSHD, unrecorded.subject, HOST)).toEqual(exeMiss("not-from-image"));
    const other = honest();
    other.provenance.layer = "other";
    other.provenance.file = { ...other.provenance.file, ino: 5n };
    expect(entryMiss(SSHD, other.subject, HOST)).toEqual(exeMiss("not-the-image-file"));
    expect(entryMiss(SSHD, honest().subject, { host: true })).toEqual(exeMiss("not-resolved"));
    const preload = honest();
    preload.provenance.layer = "other";
    preload.provenance.loaderEnv = ["LD_PRELOAD", "LD_AUDIT"];
    expect(entryMiss(SSHD, preload.subject, HOST)).toEqual(exeMiss("loader-env"));
  });
});

describe("exact allow paths", () => {
  it("are the entries' exe and parent-exe without a *, each once, in order", () => {
    const allow: AllowEntry[] = [
      { exe: "/usr/sbin/sshd" },
      { exe: "/usr/lib/openssh/*" },
      { "parent-exe": "/usr/sbin/sshd" },
      { exe: "/usr/bin/passwd", "parent-exe": "/usr/sbin/cron", accesses: ["read"] },
      { accesses: ["read"] },
      { exe: "sshd" },
      { exe: "/usr/bin/passwd" },
    ];
    expect(exactAllowPaths({ allow })).toEqual(["/usr/sbin/sshd", "/usr/bin/passwd", "/usr/sbin/cron"]);
    expect(exactAllowPaths({})).toEqual([]);
    expect(exactAllowPaths({ allow: [{ exe: "/*" }] })).toEqual([]);
  });
});

describe("allow decisions", () => {
  it("allow the issue's /etc/shadow readers and nobody else", () => {
    expect(allowingEntry(SHADOW, honest("/usr/sbin/sshd").subject, SCOPE)).toBe(0);
    expect(allowingEntry(SHADOW, honest("/usr/sbin/unix_chkpwd").subject, SCOPE)).toBe(1);
    expect(
      allowingEntry(SHADOW, honest("/usr/bin/passwd", "/bin/sh", ["read", "write"]).subject, SCOPE),
    ).toBe(2);
    expect(allowingEntry(SHADOW, honest("/usr/bin/anything", "/usr/sbin/cron").subject, SCOPE)).toBe(3);
    expect(allowingEntry(SHADOW, honest("/usr/bin/cat").subject, SCOPE)).toBeUndefined();
    expect(allowingEntry(SHADOW, honest("/tmp/sshd").subject, SCOPE)).toBeUndefined();
    expect(allowingEntry(SHADOW, honest("/usr/bin/cat", "/tmp/cron").subject, SCOPE)).toBeUndefined();
    expect(allowingEntry(undefined, honest().subject, SCOPE)).toBeUndefined();
    expect(allowingEntry([], honest().subject, SCOPE)).toBeUndefined();
    expect(allowingEntry(SHADOW, honest().subject)).toBeUndefined();
  });

  it("return the first entry that holds", () => {
    const allow: AllowEntry[] = [{ exe: "/usr/bin/cat" }, { exe: "/usr/sbin/*" }, SSHD];
    expect(allowDecision(allow, honest().subject, SCOPE)).toEqual({ entry: 1 });
    expect(allowDecision(SHADOW, honest().subject, SCOPE)).toEqual({ entry: 0 });
  });

  it("or why each entry did not hold, in the list's order", () => {
    const dropped = honest("/usr/sbin/sshd", "/usr/sbin/cron");
    dropped.provenance.layer = "container";
    dropped.parent.reparented = true;
    expect(allowDecision(SHADOW, dropped.subject, SCOPE)).toEqual({
      misses: [
        { entry: 0, field: "exe", reason: "written-in-container" },
        { entry: 1, field: "exe", reason: "other-executable" },
        { entry: 2, field: "exe", reason: "other-executable" },
        { entry: 3, field: "parent-exe", reason: "reparented" },
      ],
    });
    expect(allowDecision(undefined, honest().subject, SCOPE)).toEqual({ misses: [] });
    expect(allowDecision([], honest().subject, SCOPE)).toEqual({ misses: [] });
  });

  it("fail closed on what the kernel did not record: unknown executable, no parent, no process", () => {
    const unknown = honest();
    unknown.process.exe = { source: "unknown" } satisfies ExecIdentity;
    expect(allowingEntry(SHADOW, unknown.subject, SCOPE)).toBeUndefined();
    const unknownParent = honest("/usr/bin/vi", "/usr/sbin/cron");
    unknownParent.parent.exe = { source: "unknown" };
    expect(allowingEntry(SHADOW, unknownParent.subject, SCOPE)).toBeUndefined();
    const orphan = honest("/usr/bin/vi");
    orphan.process.parent = undefined;
    expect(allowingEntry(SHADOW, orphan.subject, SCOPE)).toBeUndefined();
    expect(allowDecision(SHADOW, { accesses: ["read"] }, SCOPE)).toEqual({
      misses: [
        { entry: 0, field: "exe", reason: "unknown-process" },
        { entry: 1, field: "exe", reason: "unknown-process" },
        { entry: 2, field: "exe", reason: "unknown-process" },
        { entry: 3, field: "parent-exe", reason: "unknown-process" },
      ],
    });
  });
});

describe("entry descriptions", () => {
  it("are short texts for logs and status", () => {
    expect(describeEntry({ exe: "/usr/bin/passwd", accesses: ["read", "write"] })).toBe(
      "exe=/usr/bin/passwd accesses=read,write",
    );
    expect(describeEntry({ "parent-exe": "/usr/sbin/cron" })).toBe("parent-exe=/usr/sbin/cron");
    expect(describeEntry({ exe: "/usr/lib/openssh/*", "parent-exe": "/usr/sbin/sshd" })).toBe(
      "exe=/usr/lib/openssh/* parent-exe=/usr/sbin/sshd",
    );
  });
});
