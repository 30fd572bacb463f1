import { describe, expect, it } from "vitest";
import type { NodeTrapError } from "../controllers/ports.ts";
import { createKernelSide, trapErrorsRecorder } from "./agent-kernel.ts";
import type { AgentWatchTable } from "./watch-table.ts";

describe("the kernel side's trap errors", () => {
  it("are kept before the watch table exists and listed by it once it does", () => {
    const side = createKernelSide();
    const record = trapErrorsRecorder(side);
    const errors = [{ trapId: "t" }] as unknown as NodeTrapError[];
    record(errors);
    expect(side.trapErrors).toBe(errors);
    const listed: (readonly NodeTrapError[])[] = [];
    side.table = {
      unarmed: (e: readonly NodeTrapError[]) => void listed.push(e),
    } as unknown as AgentWatchTable;
    record([]);
    expect(listed).toEqual([[]]);
    expect(side.trapErrors).toEqual([]);
  });
});
