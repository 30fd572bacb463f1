import { afterEach, describe, expect, it, vi } from "vitest";
import type { KernelEvent } from "../kernel/contract.ts";
import { createAttributionRetry } from "./attribution-retry.ts";

const event = (pid: number) => ({ pid }) as KernelEvent;

describe("layer accesses waiting for their container's name", () => {
  afterEach(() => vi.useRealTimers());

  it("are routed again until named, and given up (counted) when the window ends", () => {
    vi.useFakeTimers();
    const named = new Set<number>();
    const routed: number[] = [];
    const given: number[] = [];
    const retry = createAttributionRetry({
      retry: (e) => named.has(e.pid) && routed.push(e.pid) > 0,
      giveUp: (e) => given.push(e.pid),
      windowMs: 2000,
      intervalMs: 100,
    });
    retry.park(event(1));
    retry.park(event(2));
    vi.advanceTimersByTime(500);
    expect(routed).toEqual([]);
    named.add(1); // the kubelet reported the container of event 1
    vi.advanceTimersByTime(100);
    expect(routed).toEqual([1]);
    expect(retry.size()).toBe(1);
    vi.advanceTimersByTime(2000);
    expect(given).toEqual([2]);
    expect(retry.size()).toBe(0);
  });

  it("gives up an event whose routing throws, and keeps the timer and the others going", () => {
    vi.useFakeTimers();
    const given: number[] = [];
    const errors: unknown[] = [];
    let named = false;
    const routed: number[] = [];
    const retry = createAttributionRetry({
      retry: (e) => {
        if (e.pid === 1) throw new Error("broken HiveData");
        if (named) routed.push(e.pid);
        return named;
      },
      giveUp: (e) => given.push(e.pid),
      onError: (error) => errors.push(error),
      intervalMs: 100,
    });
    retry.park(event(1));
    retry.park(event(2));
    vi.advanceTimersByTime(100);
    expect(given).toEqual([1]);
    expect(errors).toHaveLength(1);
    named = true;
    vi.advanceTimersByTime(100);
    expect(routed).toEqual([2]);
  });

  it("holds at most `capacity`, the oldest given up first, and gives up all at stop", () => {
    const given: number[] = [];
    const retry = createAttributionRetry({
      retry: () => false,
      giveUp: (e) => given.push(e.pid),
      capacity: 2,
    });
    for (const pid of [1, 2, 3]) retry.park(event(pid));
    expect(given).toEqual([1]);
    retry.stop();
    expect(given).toEqual([1, 2, 3]);
  });
});
