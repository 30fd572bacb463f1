import { describe, expect, it } from "vitest";
import type { KernelEvent } from "../kernel/contract.ts";
import { rateKeyOf } from "./handle-event.ts";

const exe = (identity: { source: string; exe?: string }) =>
  ({ process: { exe: identity } }) as unknown as Pick<KernelEvent, "process">;

describe("the rate limit's key", () => {
  it("is the trap, the container and the executable the kernel recorded", () => {
    expect(
      rateKeyOf(
        exe({ source: "kernel", exe: "/usr/bin/cat" }),
        { annotations: { container_id: "c-1" } },
        "t",
      ),
    ).toEqual({ trapId: "t", container: "c-1", exe: "/usr/bin/cat" });
  });

  it("says host outside containers and unknown for an executable not known", () => {
    expect(rateKeyOf({} as Pick<KernelEvent, "process">, { annotations: {} }, "t")).toEqual({
      trapId: "t",
      container: "host",
      exe: "unknown",
    });
    expect(
      rateKeyOf(exe({ source: "unknown", exe: "/x" }), { annotations: { container_id: "" } }, "t"),
    ).toEqual({
      trapId: "t",
      container: "host",
      exe: "unknown",
    });
  });
});
