/**
 * The usual life of an integration test file: one Hive API server (a real control plane with the
 * CRDs) for the file, and one Cluster on it per test, stopped after the test (which also fails
 * the test on an agent request the server refused and the test did not declare).
 */
import { afterAll, afterEach, beforeAll } from "vitest";
import { Cluster, type HiveApi, startHiveApi } from "./harness.ts";

/** Registers the hooks; the returned function starts the test's Cluster. */
export function clusterPerTest(): () => Promise<Cluster> {
  let hive: HiveApi | undefined;
  let cluster: Cluster | undefined;
  beforeAll(async () => {
    hive = await startHiveApi();
  });
  afterAll(async () => {
    await hive?.stop();
  });
  afterEach(async () => {
    await cluster?.stop();
    cluster = undefined;
  });
  return async () => {
    if (!hive) throw new Error("the Hive API server did not start (beforeAll)");
    cluster = await Cluster.start(hive);
    return cluster;
  };
}
