import { describe, expect, it } from "vitest";
import { findInputs, knownProblems, withValues } from "./inputs.ts";

const pending = (value: unknown) => Promise.resolve(value);

describe("pending inputs", () => {
  it("are found by option path, RegExps and plain leaves left alone", () => {
    const args = {
      image: pending("x"),
      traps: [{ path: "/a", match: { containerName: /api/, ip: pending("1") } }],
    };
    expect(findInputs(args).map((p) => p.path)).toEqual(["image", "traps[0].match.ip"]);
    const filled = withValues(args, findInputs(args), ["img", "10.0.0.1"]);
    expect(filled).toEqual({
      image: "img",
      traps: [{ path: "/a", match: { containerName: /api/, ip: "10.0.0.1" } }],
    });
    expect(filled.traps[0]?.match.containerName).toBe(args.traps[0]?.match.containerName);
  });

  it("excuse only the problems their value could change", () => {
    const found = findInputs({
      traps: [{ create: pending(true), path: pending("/x") }],
      tolerations: [{ operator: pending("Equal") }],
    });
    const problems = [
      { option: "traps[0].path", message: "unknown yet" },
      { option: "traps[0].mode", message: "only applies with create: true" },
      { option: "traps[0].accesses[0]", message: "a known mistake" },
      { option: "tolerations[0].value", message: 'must be empty with operator "Exists"' },
      { option: "tolerations[0].key", message: "a known mistake" },
      { option: "metricsPort", message: "a known mistake" },
    ];
    expect(knownProblems(problems, found).map((p) => p.option)).toEqual([
      "traps[0].accesses[0]",
      "tolerations[0].key",
      "metricsPort",
    ]);
  });
});
