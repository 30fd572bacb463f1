/**
 * What the `hive watch` planning tests share: a policy file's HivePolicy, a local container, and a
 * host root holding /etc/shadow made afresh for each test.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach } from "vitest";
import type { HivePolicy, HiveTrap } from "../../api/index.ts";
import type { LocalContainer } from "../../runtime/standalone/watch-plan.ts";

export function policy(name: string, traps: HiveTrap[]): HivePolicy {
  return {
    apiVersion: "hive-operator.com/v1alpha1",
    kind: "HivePolicy",
    metadata: { name },
    spec: { traps },
  };
}

export const container = (over: Partial<LocalContainer>): LocalContainer => ({
  id: "c1",
  name: "c1",
  pid: 1,
  runtimeNamespace: "default",
  labels: {},
  ...over,
});

/** A fresh host root with /etc/shadow for each test of the describe block it is called in. */
export function useHostRoot(prefix: string): () => string {
  let root = "";
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), prefix));
    mkdirSync(join(root, "etc"));
    writeFileSync(join(root, "etc/shadow"), "x");
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));
  return () => root;
}
