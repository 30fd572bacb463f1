/**
 * kube-apiserver's own /metrics, read as the admin: what the server says it did, for benchmarks
 * that count where its LISTs were served from (`apiserver_storage_list_total`, labelled
 * storage="watchcache" or "etcd" and by the index used) rather than guessing from the query.
 */
import { request } from "node:https";
import type { ControlPlane } from "./control-plane.ts";

/** The server's /metrics text. */
export function scrapeMetrics(cp: ControlPlane): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      new URL("/metrics", cp.url),
      { ca: cp.caPem, headers: { authorization: `Bearer ${cp.adminToken}` } },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        res.on("end", () =>
          res.statusCode === 200 ? resolve(body) : reject(new Error(`/metrics: ${res.statusCode} ${body}`)),
        );
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** Every sample of `metric`: its labels and value. */
export function samples(text: string, metric: string): { labels: Record<string, string>; value: number }[] {
  const out: { labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${metric}{`) && !line.startsWith(`${metric} `)) continue;
    const m = /^[^{ ]+(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[1] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1] as string] = l[2] as string;
    out.push({ labels, value: Number(m[2]) });
  }
  return out;
}

/**
 * LISTs the server served, as `apiserver_storage_list_total` counts them, by `resource storage`;
 * or, with `metric`, another counter of that family (`apiserver_storage_list_fetched_objects_total`:
 * the objects read to serve them, before label and field selectors filtered them).
 */
export function listsServed(text: string, metric = "apiserver_storage_list_total"): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of samples(text, metric)) {
    const key = `${s.labels.resource} ${s.labels.storage}`;
    out.set(key, (out.get(key) ?? 0) + s.value);
  }
  return out;
}

/** What grew between two readings of listsServed (the LISTs served in between), by resource and storage. */
export function listsServedBetween(before: Map<string, number>, after: Map<string, number>) {
  const byResource: Record<string, Record<string, number>> = {};
  const byStorage: Record<string, number> = {};
  for (const [key, value] of after) {
    const delta = value - (before.get(key) ?? 0);
    if (delta <= 0) continue;
    const [resource = "?", storage = "?"] = key.split(" ");
    byResource[resource] = { ...byResource[resource], [storage]: delta };
    byStorage[storage] = (byStorage[storage] ?? 0) + delta;
  }
  return { byResource, byStorage };
}
