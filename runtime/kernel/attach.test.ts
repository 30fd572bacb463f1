import { describe, expect, it } from "vitest";
import { checkArchitecture } from "./architecture.ts";
import { attachCandidates, attachError, type KernelFacts, privilegeError } from "./attach.ts";

const facts = (over: Partial<KernelFacts> = {}): KernelFacts => ({
  kprobeMulti: true,
  splitInodePermission: false,
  perfEventParanoid: 2,
  capabilities: new Set(["BPF", "PERFMON"]),
  ...over,
});
const modes = (c: ReturnType<typeof attachCandidates>) => c.map((x) => x.mode);

describe("choosing the attach mode", () => {
  it("prefers the kprobe program through a kprobe.multi link, then fentry, then a perf-event kprobe", () => {
    expect(modes(attachCandidates("auto", facts(), null))).toEqual(["kprobe.multi", "fentry", "kprobe"]);
  });

  it("skips kprobe.multi on kernels without fprobe and says so", () => {
    const c = attachCandidates("auto", facts({ kprobeMulti: false }), null);
    expect(modes(c)).toEqual(["fentry", "kprobe"]);
    expect(c[0]?.reason).toMatch(/no kprobe\.multi links.*CAP_BPF \+ CAP_PERFMON/);
  });

  it("tries the mode of a pinned link first, so a restarted agent adopts it", () => {
    expect(modes(attachCandidates("auto", facts(), "fentry"))).toEqual(["fentry", "kprobe.multi", "kprobe"]);
  });

  it("uses exactly the requested mode when one is named", () => {
    const c = attachCandidates("kprobe", facts(), "fentry");
    expect(c).toEqual([{ mode: "kprobe", reason: "requested (--attach kprobe)" }]);
  });
});

describe("a refused attach names what is missing", () => {
  it("blames perf_event_paranoid and names the option, not kprobe support, for a perf-event kprobe", () => {
    const error = attachError("kprobe", 13, facts({ perfEventParanoid: 3 }));
    expect(error.code).toBe("PermissionDenied");
    expect(error.message).toMatch(/CAP_SYS_ADMIN.*kernel\.perf_event_paranoid = 3/);
    expect(error.hint).toMatch(/legacyKernelCapabilities: true/);
    expect(error.hint).not.toMatch(/CONFIG_KPROBES/);
  });

  it("names the missing capability when CAP_BPF or CAP_PERFMON is absent", () => {
    const error = privilegeError("fentry", "load", 1, facts({ capabilities: new Set(["BPF"]) }));
    expect(error.message).toMatch(/lacks CAP_PERFMON$/);
    expect(error.hint).toMatch(/add PERFMON/);
  });

  it("reports a kernel without the link as unsupported, not as a privilege problem", () => {
    const error = attachError("kprobe.multi", 95, facts());
    expect(error.code).toBe("KprobeUnsupported");
    expect(error.hint).toMatch(/5\.18\+ with CONFIG_FPROBE/);
  });
});

describe("the architecture", () => {
  it("accepts x86-64 and arm64 and refuses any other with an error naming it", () => {
    expect(checkArchitecture("x64")).toBe("x64");
    expect(checkArchitecture("arm64")).toBe("arm64");
    expect(() => checkArchitecture("riscv64")).toThrowError(
      expect.objectContaining({ code: "ArchitectureUnsupported", object: "riscv64" }),
    );
  });
});
