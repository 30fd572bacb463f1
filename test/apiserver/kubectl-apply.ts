/**
 * `kubectl apply -f -` of a YAML stream, over HTTP, the way kubectl does it: first every
 * document is mapped to a resource the server's discovery serves (GET /api/v1, /apis and each
 * group version, read once, before any write), then the mapped ones are written in stream order
 * (create, or replace what exists). A document whose kind discovery does not list fails with
 * kubectl's own message and is not sent; the others are still applied, and the apply fails.
 * That two-phase shape is why a stream holding a CRD and objects of its kind fails on a new
 * cluster whatever its order (kubectl 1.32 against this stand-in prints the same lines).
 */
import { parseAllDocuments } from "yaml";
import type { ApiServer } from "./server.ts";

export interface ApplyResult {
  /** `kind/name created` or `kind/name configured`, in order. */
  applied: string[];
  /** What kubectl prints on stderr, one entry per failed document. */
  errors: string[];
}

interface Served {
  plural: string;
  namespaced: boolean;
}

interface Doc {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string };
}

async function discover(get: (path: string) => Promise<unknown>): Promise<Map<string, Served>> {
  const served = new Map<string, Served>();
  const groupVersions = ["v1"];
  const groups = (await get("/apis")) as { groups: { versions: { groupVersion: string }[] }[] };
  for (const g of groups.groups) for (const v of g.versions) groupVersions.push(v.groupVersion);
  for (const gv of groupVersions) {
    const list = (await get(gv === "v1" ? "/api/v1" : `/apis/${gv}`)) as {
      resources: { name: string; kind: string; namespaced: boolean }[];
    };
    for (const r of list.resources) {
      if (!r.name.includes("/")) served.set(`${gv} ${r.kind}`, { plural: r.name, namespaced: r.namespaced });
    }
  }
  return served;
}

/** Applies `yamlText` as the stand-in's admin (system:masters), as `kubectl apply -f -`. */
export async function kubectlApply(api: ApiServer, yamlText: string): Promise<ApplyResult> {
  const headers = { Authorization: `Bearer ${api.token("admin")}`, "Content-Type": "application/json" };
  const request = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${api.url}${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const get = async (path: string) => {
    const res = await request("GET", path);
    if (res.status !== 200) throw new Error(`discovery GET ${path}: ${res.status}`);
    return res.body;
  };
  const served = await discover(get);
  const docs = parseAllDocuments(yamlText);
  const objects = (Array.isArray(docs) ? docs : [docs]).map((d) => d.toJS() as Doc).filter(Boolean);
  const result: ApplyResult = { applied: [], errors: [] };
  const mapped: { doc: Doc; path: string }[] = [];
  for (const doc of objects) {
    const resource = served.get(`${doc.apiVersion} ${doc.kind}`);
    const namespace = doc.metadata.namespace ?? "default";
    if (!resource) {
      result.errors.push(
        `resource mapping not found for name: "${doc.metadata.name}" namespace: "${doc.metadata.namespace ?? ""}" ` +
          `from "STDIN": no matches for kind "${doc.kind}" in version "${doc.apiVersion}"\n` +
          "ensure CRDs are installed first",
      );
      continue;
    }
    const base = doc.apiVersion === "v1" ? "/api/v1" : `/apis/${doc.apiVersion}`;
    mapped.push({
      doc,
      path: `${base}${resource.namespaced ? `/namespaces/${namespace}` : ""}/${resource.plural}`,
    });
  }
  for (const { doc, path } of mapped) {
    const what = `${doc.kind.toLowerCase()}/${doc.metadata.name}`;
    const created = await request("POST", path, doc);
    if (created.status === 201 || created.status === 200) {
      result.applied.push(`${what} created`);
      continue;
    }
    if (created.status !== 409) {
      result.errors.push(`${what}: ${created.status} ${String(created.body.message)}`);
      continue;
    }
    const item = `${path}/${encodeURIComponent(doc.metadata.name)}`;
    const existing = await request("GET", item);
    const resourceVersion = (existing.body.metadata as { resourceVersion?: string }).resourceVersion;
    const replaced = await request("PUT", item, { ...doc, metadata: { ...doc.metadata, resourceVersion } });
    if (replaced.status === 200) result.applied.push(`${what} configured`);
    else result.errors.push(`${what}: ${replaced.status} ${String(replaced.body.message)}`);
  }
  return result;
}
