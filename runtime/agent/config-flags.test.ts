import { describe, expect, it } from "vitest";
import { isHiveError } from "../../api/errors.ts";
import { flagOrEnv, positiveInt, readAgentFlags } from "./config-flags.ts";

describe("the agent's command line", () => {
  it("takes a flag over its environment twin, and the twin when the flag is absent", () => {
    const flags = readAgentFlags(["--proc-root", "/host/proc"], {
      HIVE_PROC_ROOT: "/p",
      HIVE_SPOOL_DIR: "/s",
    });
    expect(flagOrEnv(flags, "proc-root", "HIVE_PROC_ROOT")).toBe("/host/proc");
    expect(flagOrEnv(flags, "spool-dir", "HIVE_SPOOL_DIR")).toBe("/s");
    expect(flagOrEnv(flags, "pin-root", "HIVE_PIN_ROOT")).toBeUndefined();
  });

  it("refuses an unknown flag as ConfigInvalid", () => {
    expect(() => readAgentFlags(["--bogus"], {})).toThrow(expect.objectContaining({ code: "ConfigInvalid" }));
  });

  it("reads whole numbers, falls back when unset or empty, and names the flag otherwise", () => {
    expect(positiveInt("--n", "12", 5)).toBe(12);
    expect(positiveInt("--n", undefined, 5)).toBe(5);
    expect(positiveInt("--n", "", 5)).toBe(5);
    for (const text of ["-1", "1.5", "x"]) {
      try {
        positiveInt("--n", text, 5);
        throw new Error(`accepted ${text}`);
      } catch (error) {
        expect(isHiveError(error, "ConfigInvalid")).toBe(true);
        expect((error as Error).message).toBe("--n must be a whole number");
      }
    }
  });
});
