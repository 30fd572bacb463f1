/**
 * Where kube-apiserver would serve a LIST from, decided from its query alone as the watch cache
 * (the cacher) decides whether to answer or hand the LIST to storage (etcd), without the
 * ConsistentListFromCache feature:
 * - no `resourceVersion` (or ""): a consistent read, i.e. a quorum read from etcd → storage;
 * - a `continue` token: the next page of a snapshot read from etcd → storage;
 * - a `limit` with any `resourceVersion` but "0": an exact, paginated read → storage;
 * - a `resourceVersionMatch` other than NotOlderThan (Exact) → storage;
 * - otherwise (`resourceVersion=0`, or a version with no limit): the watch cache.
 * The stand-in serves every LIST from its one store; this only says which a real API server
 * would have used, so that benchmarks can count the reads that reach etcd.
 */
export type ListSource = "watch-cache" | "storage";

export function listSource(query: URLSearchParams): ListSource {
  const rv = query.get("resourceVersion") ?? "";
  const match = query.get("resourceVersionMatch") ?? "";
  const limit = Number(query.get("limit") ?? "0");
  if (rv === "") return "storage";
  if ((query.get("continue") ?? "") !== "") return "storage";
  if (limit > 0 && rv !== "0") return "storage";
  if (match !== "" && match !== "NotOlderThan") return "storage";
  return "watch-cache";
}
