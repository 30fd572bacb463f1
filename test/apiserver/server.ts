/**
 * Kubernetes API server stand-in for tests: a real HTTP server on 127.0.0.1 that speaks the
 * Kubernetes REST and watch protocol, so the real `@kubernetes/client-node` runs unchanged.
 *
 * Serves: core v1 pods, namespaces, nodes, events, secrets, configmaps, serviceaccounts;
 * coordination.k8s.io/v1 leases; events.k8s.io/v1 events; apps/v1 daemonsets;
 * apiextensions.k8s.io/v1 CRDs (creating one serves its kind, validating writes against its
 * openAPIV3Schema; deleting it removes its objects); Hive's CRDs from api/crd.ts are installed
 * at start (hivepolicies with the status subresource, hivedata).
 *
 * Semantics (see store.ts): cluster-wide resourceVersion; uid; generation bumped on spec
 * changes only; create/get/list/update/patch (merge, JSON, strategic-as-merge)/delete/
 * deletecollection; 409 Conflict on a stale resourceVersion and AlreadyExists; label and field
 * selectors; `limit` + `continue` over a consistent snapshot (410 Expired once compacted or
 * stale); watch with ADDED/MODIFIED/DELETED, BOOKMARK (`allowWatchBookmarks`), resume from a
 * resourceVersion, and an ERROR event with a 410 Expired Status when it is older than the
 * retained history (`historyLimit`, or `compact()`); finalizers and deletionTimestamp;
 * namespace termination; ownerReference garbage collection (background, foreground, orphan);
 * the status subresource; custom resources pruned, defaulted and validated by their CRD
 * schema, including its CEL rules (x-kubernetes-validations; transition rules skipped); Lease times must be MicroTime (six fractional digits);
 * Status error bodies as kube-apiserver writes them (a too-old resourceVersion is reason
 * "Expired", code 410, as upstream). By default pods are deleted at once (no kubelet; a
 * finalizer holds one in Terminating); a new pod's status is reset to Pending as the real
 * server does, so tests set it through `/status` (testing.ts setPodRunning). With
 * `podTerminationMs`, deleting a pod bound to a node first sets deletionTimestamp, and the pod
 * goes that long later, as a kubelet would (gracePeriodSeconds=0 forces). Namespaces
 * default, kube-system, kube-public, kube-node-lease exist; creating in a missing namespace is
 * 404 as upstream. dryRun and server-side apply are refused (400/415). List items of built-in
 * kinds carry no kind/apiVersion, as upstream.
 *
 * Start it:
 *   const api = await startApiServer();            // options: StartOptions below
 *   const kc = api.kubeConfig("node-a");            // bearer token "node-a" → user "node-a"
 *   kc.makeApiClient(CoreV1Api) …
 *   api.requests / api.countRequests({ verb: "list", user: "node-a" })  // each names its userAgent,
 *                                                  // a LIST its listSource (list-source.ts)
 *   await api.restart();   // drop every connection and watch mid-stream, keep all state
 *   api.compact();         // forget watch history: older resourceVersions get 410
 *   api.inject({ verb: "update", resource: "leases", status: 500, times: 1 })  // or delayMs, drop
 *   api.store.create(api.resource("pods"), "default", body)  // write while HTTP is down
 *   api.connectionCount(); api.watchCount(); api.closeWatches()
 *   await api.stop();
 * test/apiserver/index.ts re-exports this and the helpers of testing.ts.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { hiveCrds } from "../../api/crd.ts";
import { admit, type Operation } from "./admission.ts";
import { Authenticator, NODE_NAME_EXTRA, type UserSpec } from "./authn.ts";
import { type ListSource, listSource } from "./list-source.ts";
import { authorize, forbiddenMessage } from "./rbac.ts";
import { apiVersionOf, type ResourceDef, resourceKey } from "./resources.ts";
import { ApiError, errors, type StatusBody } from "./status.ts";
import {
  type DeleteOptions,
  type KubeObject,
  type ListQuery,
  Store,
  type StoreOptions,
  type Watcher,
} from "./store.ts";

export type Verb =
  | "get"
  | "list"
  | "watch"
  | "create"
  | "update"
  | "patch"
  | "delete"
  | "deletecollection"
  | "discovery";

export interface RequestRecord {
  time: number;
  method: string;
  verb: Verb;
  /** Resource plural, with the subresource when there is one ("pods", "hivepolicies/status"). */
  resource: string;
  group: string;
  namespace?: string;
  name?: string;
  user: string;
  /** The node a pod-bound token names (its authentication.kubernetes.io/node-name claim). */
  node?: string;
  /** HTTP status written (200 for a watch that started). */
  code: number;
  /** The query string, e.g. "?limit=500&continue=…". */
  query: string;
  /** The client's User-Agent header ("" when it sent none). */
  userAgent: string;
  /** For a LIST: where kube-apiserver would have served it from (list-source.ts). */
  listSource?: ListSource;
  /** Answered by an injected fault (inject), not by the server's own rules. */
  injected?: true;
}

export interface RequestFilter {
  verb?: Verb;
  /** Requests made with a pod-bound token of this node (every agent shares one username). */
  node?: string;
  resource?: string;
  group?: string;
  namespace?: string;
  name?: string;
  user?: string;
}

export interface FaultRule extends RequestFilter {
  /** Reply with this HTTP status and a matching Status body (500, 503, 429, 403 …). */
  status?: number;
  /** Wait this long before handling (or failing) the request. */
  delayMs?: number;
  /** Destroy the connection without an answer. */
  drop?: boolean;
  /** How many matching requests to affect; default unlimited. */
  times?: number;
  /** Extra condition, e.g. `(r) => r.query.includes("continue=")`. */
  when?: (request: RequestRecord) => boolean;
}

export interface StartOptions extends StoreOptions {
  /** Fixed port (default: any free port). */
  port?: number;
  /** Interval between BOOKMARK events on watches that allow them. Default 1000 ms. */
  bookmarkIntervalMs?: number;
  /**
   * CustomResourceDefinitions installed at start; default Hive's own (api/crd.ts), so their
   * openAPIV3Schema validates every write as a real API server would. `[]` installs none.
   */
  crds?: unknown[];
  /**
   * Enforcement, as a real API server's: every request is authenticated (bearer token, 401
   * otherwise), authorized by RBAC from the stored Roles, ClusterRoles and bindings (403,
   * rbac.ts) and admitted by the stored ValidatingAdmissionPolicies (admission.ts). Both are
   * on by default; a test turns one off only with the reason it must (`off: "why"`).
   * Faults (inject) apply first.
   */
  rbac?: true | { off: string };
  admission?: true | { off: string };
  /** Serve HTTPS with this key and certificate (what in-cluster clients require). Default: HTTP. */
  tls?: { key: string; cert: string };
}

export interface ApiServer {
  /** Base URL, e.g. http://127.0.0.1:40123 */
  readonly url: string;
  readonly port: number;
  /** The state behind the server (tests read it directly for assertions). */
  readonly store: Store;
  /** Every request served, in order. */
  readonly requests: RequestRecord[];
  /**
   * A KubeConfig whose bearer token authenticates as `user` (default "admin", in
   * system:masters). A plain name is a user with no groups but system:authenticated; RBAC
   * grants it nothing until a binding does (authn.ts serviceAccountUser for an agent's token).
   */
  kubeConfig(user?: UserSpec): KubeConfig;
  /** The bearer token that authenticates as `user` (for a process given `--token`). */
  token(user: UserSpec): string;
  countRequests(filter?: RequestFilter): number;
  resetRequests(): void;
  /** Fail, delay or drop matching requests; returns a function that removes the rule. */
  inject(rule: FaultRule): () => void;
  /** Close every connection (watches end mid-stream), keep all state, listen again on the same port. */
  restart(options?: { downtimeMs?: number }): Promise<void>;
  /** End all watch streams cleanly, as a watch timeout would. */
  closeWatches(): void;
  /** Forget watch history: watches and continue tokens from older resourceVersions get 410. */
  compact(): void;
  /** Number of open watch streams. */
  watchCount(): number;
  /** TCP connections accepted since start (restarts included). */
  connectionCount(): number;
  /** Look up a served resource by plural (and group). */
  resource(plural: string, group?: string): ResourceDef;
  stop(): Promise<void>;
}

interface Route {
  def: ResourceDef;
  namespace?: string;
  name?: string;
  subresource?: "status";
}

const JSON_HEADERS = { "Content-Type": "application/json" };
const MAX_BODY = 16 * 1024 * 1024;

function send(res: ServerResponse, code: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(code, { ...JSON_HEADERS, "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) reject(errors.badRequest("request body too large"));
      else chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function parseJson(text: string): unknown {
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch (err) {
    throw errors.badRequest(`the request body is not valid JSON: ${(err as Error).message}`);
  }
}

function statusForCode(code: number, message: string): StatusBody {
  const reasons: Record<number, string> = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
  };
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason: reasons[code] ?? "Unknown",
    code,
  };
}

export function matchesFilter(r: RequestRecord, f: RequestFilter): boolean {
  return (
    (f.verb === undefined || r.verb === f.verb) &&
    (f.resource === undefined || r.resource === f.resource) &&
    (f.group === undefined || r.group === f.group) &&
    (f.namespace === undefined || r.namespace === f.namespace) &&
    (f.name === undefined || r.name === f.name) &&
    (f.user === undefined || r.user === f.user) &&
    (f.node === undefined || r.node === f.node)
  );
}

export async function startApiServer(options: StartOptions = {}): Promise<ApiServer> {
  const store = new Store(options);
  const authenticator = new Authenticator();
  const enforceRbac = options.rbac === undefined || options.rbac === true;
  const enforceAdmission = options.admission === undefined || options.admission === true;
  for (const crd of options.crds ?? hiveCrds()) {
    store.create(
      store.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions") as ResourceDef,
      undefined,
      crd,
    );
  }
  const bookmarkIntervalMs = options.bookmarkIntervalMs ?? 1000;
  const requests: RequestRecord[] = [];
  const faults: (FaultRule & { remaining: number })[] = [];
  const sockets = new Set<Socket>();
  const watchStreams = new Set<{ watcher: Watcher | undefined; res: ServerResponse; end: () => void }>();
  let server: Server;
  let port = options.port ?? 0;
  let connections = 0;

  function route(path: string): Route | "discovery" {
    const parts = path.split("/").filter((p) => p !== "");
    let group: string;
    let version: string;
    let rest: string[];
    if (parts[0] === "api") {
      if (parts.length <= 2) return "discovery";
      group = "";
      version = parts[1] ?? "";
      rest = parts.slice(2);
    } else if (parts[0] === "apis") {
      if (parts.length <= 3) return "discovery";
      group = parts[1] ?? "";
      version = parts[2] ?? "";
      rest = parts.slice(3);
    } else if (
      parts[0] === "version" ||
      parts[0] === "healthz" ||
      parts[0] === "readyz" ||
      parts[0] === "livez"
    ) {
      return "discovery";
    } else throw errors.notFoundPath(path);
    let namespace: string | undefined;
    if (rest[0] === "namespaces" && rest.length >= 3 && !(rest.length === 3 && rest[2] === "status")) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const [plural = "", name, sub, ...extra] = rest;
    const def = store.lookup(group, version, plural);
    if (
      !def ||
      extra.length > 0 ||
      (sub !== undefined && sub !== "status") ||
      (sub === "status" && !def.statusSubresource)
    ) {
      throw errors.notFoundPath(path);
    }
    if (namespace !== undefined && !def.namespaced) throw errors.notFoundPath(path);
    const r: Route = { def };
    if (namespace !== undefined) r.namespace = namespace;
    if (name !== undefined) r.name = decodeURIComponent(name);
    if (sub === "status") r.subresource = "status";
    return r;
  }

  function discovery(path: string): unknown {
    const defs = store.definitions();
    if (path === "/version")
      return { major: "1", minor: "34", gitVersion: "v1.34.0-hive-stand-in", platform: "linux/amd64" };
    if (path === "/healthz" || path === "/readyz" || path === "/livez") return "ok";
    if (path === "/api") return { kind: "APIVersions", versions: ["v1"], serverAddressByClientCIDRs: [] };
    if (path === "/apis") {
      const groups = new Map<string, string>();
      for (const d of defs) if (d.group !== "") groups.set(d.group, d.version);
      return {
        kind: "APIGroupList",
        apiVersion: "v1",
        groups: [...groups].map(([name, version]) => ({
          name,
          versions: [{ groupVersion: `${name}/${version}`, version }],
          preferredVersion: { groupVersion: `${name}/${version}`, version },
        })),
      };
    }
    const parts = path.split("/").filter((p) => p !== "");
    const group = parts[0] === "api" ? "" : (parts[1] ?? "");
    const version = parts[0] === "api" ? (parts[1] ?? "") : (parts[2] ?? "");
    const served = defs.filter((d) => d.group === group && d.version === version);
    if (served.length === 0) throw errors.notFoundPath(path);
    const verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
    return {
      kind: "APIResourceList",
      apiVersion: "v1",
      groupVersion: group === "" ? version : `${group}/${version}`,
      resources: served.flatMap((d) => [
        { name: d.plural, singularName: d.kind.toLowerCase(), namespaced: d.namespaced, kind: d.kind, verbs },
        ...(d.statusSubresource
          ? [
              {
                name: `${d.plural}/status`,
                singularName: "",
                namespaced: d.namespaced,
                kind: d.kind,
                verbs: ["get", "patch", "update"],
              },
            ]
          : []),
      ]),
    };
  }

  function verbOf(method: string, r: Route, watch: boolean): Verb {
    switch (method) {
      case "GET":
        return r.name !== undefined ? "get" : watch ? "watch" : "list";
      case "POST":
        return "create";
      case "PUT":
        return "update";
      case "PATCH":
        return "patch";
      case "DELETE":
        return r.name !== undefined ? "delete" : "deletecollection";
      default:
        throw errors.methodNotAllowed(
          `the server does not allow this method on the requested resource (${method})`,
        );
    }
  }

  function listQuery(q: URLSearchParams): ListQuery {
    const limit = q.get("limit");
    const out: ListQuery = {
      labelSelector: q.get("labelSelector"),
      fieldSelector: q.get("fieldSelector"),
      continue: q.get("continue"),
      resourceVersion: q.get("resourceVersion"),
      resourceVersionMatch: q.get("resourceVersionMatch"),
    };
    if (limit !== null) {
      const n = Number(limit);
      if (!Number.isInteger(n) || n < 0) throw errors.badRequest(`invalid limit: ${limit}`);
      out.limit = n;
    }
    return out;
  }

  function startWatch(r: Route, q: URLSearchParams, req: IncomingMessage, res: ServerResponse): void {
    // The client may be gone already (a delayed request across restart()): subscribe nothing.
    if (res.destroyed || req.socket.destroyed) return;
    // store.watch parses selectors before the 200 is written, so a bad selector is a 400 like upstream.
    const bookmarks = q.get("allowWatchBookmarks") === "true";
    const timeoutSeconds = Number(q.get("timeoutSeconds") ?? "0");
    const timers: NodeJS.Timeout[] = [];
    let ended = false;
    const entry = {
      watcher: undefined as Watcher | undefined,
      res,
      end: () => {
        if (ended) return;
        ended = true;
        for (const t of timers) clearInterval(t);
        watchStreams.delete(entry);
        entry.watcher?.close();
        if (!res.destroyed) res.end();
      },
    };
    const write = (event: unknown) => {
      if (!res.headersSent) {
        res.writeHead(200, { ...JSON_HEADERS, "Transfer-Encoding": "chunked" });
        res.flushHeaders();
      }
      if (!res.destroyed && !res.writableEnded) res.write(`${JSON.stringify(event)}\n`);
    };
    const watcher = store.watch(
      r.def,
      r.namespace,
      {
        labelSelector: q.get("labelSelector"),
        fieldSelector: q.get("fieldSelector"),
        resourceVersion: q.get("resourceVersion"),
      },
      write,
      () => queueMicrotask(entry.end),
    );
    entry.watcher = watcher;
    if (!res.headersSent) {
      res.writeHead(200, { ...JSON_HEADERS, "Transfer-Encoding": "chunked" });
      res.flushHeaders();
    }
    if (ended) return;
    watchStreams.add(entry);
    req.on("close", entry.end);
    res.on("close", entry.end);
    if (bookmarks) {
      timers.push(
        setInterval(() => {
          write({
            type: "BOOKMARK",
            object: {
              kind: r.def.kind,
              apiVersion: apiVersionOf(r.def),
              metadata: { resourceVersion: store.currentResourceVersion() },
            },
          });
        }, bookmarkIntervalMs),
      );
    }
    if (timeoutSeconds > 0) timers.push(setTimeout(entry.end, timeoutSeconds * 1000));
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://stand-in");
    const method = req.method ?? "GET";
    const userInfo = authenticator.authenticate(req.headers.authorization);
    const user = userInfo?.username ?? "system:anonymous";
    const r = route(url.pathname);
    /** A request answered before routing (unauthenticated, or discovery), recorded by path. */
    const recordPath = (code: number) =>
      requests.push({
        time: Date.now(),
        method,
        verb: "discovery",
        resource: url.pathname,
        group: "",
        user,
        code,
        query: url.search,
        userAgent: req.headers["user-agent"] ?? "",
      });
    if (!userInfo) {
      recordPath(401);
      throw errors.unauthorized();
    }
    if (r === "discovery") {
      recordPath(200);
      const body = discovery(url.pathname);
      if (typeof body === "string") {
        res.writeHead(200, { "Content-Type": "text/plain" });
        res.end(body);
      } else send(res, 200, body);
      return;
    }
    const q = url.searchParams;
    const watch = q.get("watch") === "true" || q.get("watch") === "1";
    const verb = verbOf(method, r, watch);
    const record: RequestRecord = {
      time: Date.now(),
      method,
      verb,
      resource: r.subresource ? `${r.def.plural}/${r.subresource}` : r.def.plural,
      group: r.def.group,
      user,
      code: 0,
      query: url.search,
      userAgent: req.headers["user-agent"] ?? "",
    };
    if (verb === "list") record.listSource = listSource(q);
    const node = userInfo.extra[NODE_NAME_EXTRA]?.[0];
    if (node !== undefined) record.node = node;
    if (r.namespace !== undefined) record.namespace = r.namespace;
    if (r.name !== undefined) record.name = r.name;
    requests.push(record);
    res.on("finish", () => {
      record.code = res.statusCode;
    });
    for (const f of faults) {
      if (f.remaining <= 0 || !matchesFilter(record, f) || (f.when && !f.when(record))) continue;
      f.remaining -= 1;
      if (f.drop || f.status) record.injected = true;
      if (f.delayMs) await new Promise((resolve) => setTimeout(resolve, f.delayMs));
      if (f.drop) {
        record.code = -1;
        req.socket.destroy();
        return;
      }
      if (f.status) {
        send(
          res,
          f.status,
          statusForCode(f.status, `injected failure (${f.status}) for ${verb} ${record.resource}`),
        );
        return;
      }
    }
    const [resource = "", subresource] = record.resource.split("/");
    const selectedName = /(?:^|,)metadata\.name=([^,]+)/.exec(q.get("fieldSelector") ?? "")?.[1];
    const attributes = {
      user: userInfo,
      verb,
      apiGroup: r.def.group,
      resource,
      subresource,
      namespace: record.namespace,
      name: record.name ?? (verb === "list" || verb === "watch" ? selectedName : undefined),
    };
    if (enforceRbac && !authorize(store, attributes)) {
      send(res, 403, {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message: forbiddenMessage(attributes),
        reason: "Forbidden",
        details: {
          ...(record.name !== undefined ? { name: record.name } : {}),
          ...(r.def.group ? { group: r.def.group } : {}),
          kind: resource,
        },
        code: 403,
      });
      return;
    }
    const operations: Partial<Record<Verb, Operation>> = {
      create: "CREATE",
      update: "UPDATE",
      patch: "UPDATE",
      delete: "DELETE",
      deletecollection: "DELETE",
    };
    const operation = operations[verb];
    /** The store call of this request, admitted by the stored policies (admission.ts). */
    const admitted = <T>(write: () => T): T =>
      !enforceAdmission || operation === undefined
        ? write()
        : store.admitted(
            r.def,
            (object, oldObject) => {
              // An update that removed the last finalizer also removes the object: admitted as the update.
              if (operation !== "DELETE" && object === null) return;
              admit(store, {
                def: r.def,
                subresource: r.subresource,
                namespace: r.def.namespaced ? r.namespace : undefined,
                name: object?.metadata.name ?? oldObject?.metadata.name ?? r.name ?? "",
                operation,
                user: userInfo,
                object: operation === "DELETE" ? null : object,
                oldObject,
              });
            },
            write,
          );
    if (q.get("dryRun")) throw errors.badRequest("dryRun is not supported by the API stand-in");
    const ns = r.def.namespaced ? r.namespace : undefined;
    switch (verb) {
      case "get":
        return send(res, 200, store.get(r.def, ns, r.name ?? ""));
      case "list":
        return send(res, 200, store.list(r.def, ns, listQuery(q)));
      case "watch":
        record.code = 200;
        return startWatch(r, q, req, res);
      case "deletecollection": {
        const how = deleteOptions(q, parseJson(await readBody(req)));
        return send(
          res,
          200,
          admitted(() => store.deleteCollection(r.def, ns, listQuery(q), how)),
        );
      }
      case "delete": {
        const how = deleteOptions(q, parseJson(await readBody(req)));
        const out = admitted(() => store.delete(r.def, ns, r.name ?? "", how));
        return send(res, out.removed ? 200 : 202, out.object);
      }
    }
    const contentType = req.headers["content-type"] ?? "application/json";
    const body = parseJson(await readBody(req));
    if (body === undefined) throw errors.badRequest("the request has no body");
    switch (verb) {
      case "create":
        if (r.name !== undefined) throw errors.methodNotAllowed("POST to a named object is not allowed");
        if (!contentType.startsWith("application/json")) throw errors.unsupportedMediaType(contentType);
        return send(
          res,
          201,
          admitted(() => store.create(r.def, r.namespace, body)),
        );
      case "update":
        if (!contentType.startsWith("application/json")) throw errors.unsupportedMediaType(contentType);
        return send(
          res,
          200,
          admitted(() => store.update(r.def, ns, r.name ?? "", body, r.subresource)),
        );
      case "patch":
        return send(
          res,
          200,
          admitted(() => store.patch(r.def, ns, r.name ?? "", contentType, body, r.subresource)),
        );
    }
  }

  function onRequest(req: IncomingMessage, res: ServerResponse): void {
    handle(req, res).catch((err: unknown) => {
      if (err instanceof ApiError) send(res, err.status.code, err.status);
      else
        send(
          res,
          500,
          statusForCode(500, `internal error in the API stand-in: ${(err as Error)?.stack ?? String(err)}`),
        );
    });
  }

  async function listen(): Promise<void> {
    server = options.tls ? createHttpsServer(options.tls, onRequest) : createServer(onRequest);
    // client-node 2.x makes a new undici Agent (a new connection) per request unless shared:
    // close idle connections after 5 s (Node's default), or a busy test runs out of file
    // descriptors. Shorter breaks reuse: undici drops sockets whose keep-alive hint is < 2 s.
    server.keepAliveTimeout = 5000;
    server.on("connection", (socket) => {
      connections += 1;
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
    port = (server.address() as AddressInfo).port;
  }

  async function close(): Promise<void> {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of sockets) s.destroy();
    sockets.clear();
    for (const w of [...watchStreams]) w.end();
    await closed;
  }

  await listen();
  const url = `${options.tls ? "https" : "http"}://127.0.0.1:${port}`;

  const api: ApiServer = {
    url,
    get port() {
      return port;
    },
    store,
    requests,
    kubeConfig(user = "admin") {
      const kc = new KubeConfig();
      const name = typeof user === "string" ? user : user.username;
      kc.loadFromOptions({
        clusters: [{ name: "stand-in", server: url, skipTLSVerify: true }],
        users: [{ name, token: authenticator.tokenFor(user) }],
        contexts: [{ name: "stand-in", cluster: "stand-in", user: name }],
        currentContext: "stand-in",
      });
      return kc;
    },
    token(user) {
      return authenticator.tokenFor(user);
    },
    countRequests(filter = {}) {
      return requests.filter((r) => matchesFilter(r, filter)).length;
    },
    resetRequests() {
      requests.length = 0;
    },
    inject(rule) {
      const entry = { ...rule, remaining: rule.times ?? Number.POSITIVE_INFINITY };
      faults.push(entry);
      return () => {
        const i = faults.indexOf(entry);
        if (i >= 0) faults.splice(i, 1);
      };
    },
    async restart(opts = {}) {
      await close();
      if (opts.downtimeMs) await new Promise((resolve) => setTimeout(resolve, opts.downtimeMs));
      await listen();
    },
    closeWatches() {
      for (const w of [...watchStreams]) w.end();
    },
    compact() {
      store.compact();
    },
    watchCount() {
      return watchStreams.size;
    },
    connectionCount() {
      return connections;
    },
    resource(plural, group = "") {
      const def = store.definitions().find((d) => d.plural === plural && d.group === group);
      if (!def) throw new Error(`the stand-in serves no resource ${resourceKey(group, plural)}`);
      return def;
    },
    async stop() {
      await close();
      store.dispose();
    },
  };
  return api;
}

function deleteOptions(q: URLSearchParams, body: unknown): DeleteOptions {
  const out: DeleteOptions = {};
  const b = (body ?? {}) as {
    propagationPolicy?: string;
    preconditions?: DeleteOptions["preconditions"];
    orphanDependents?: boolean;
  };
  const policy = q.get("propagationPolicy") ?? b.propagationPolicy;
  if (policy !== undefined && policy !== null) {
    if (policy !== "Orphan" && policy !== "Background" && policy !== "Foreground") {
      throw errors.badRequest(`propagationPolicy: Unsupported value: "${policy}"`);
    }
    out.propagationPolicy = policy;
  } else if (q.get("orphanDependents") === "true" || b.orphanDependents === true)
    out.propagationPolicy = "Orphan";
  if (b.preconditions) out.preconditions = b.preconditions;
  const grace = q.get("gracePeriodSeconds") ?? (b as { gracePeriodSeconds?: number }).gracePeriodSeconds;
  if (grace !== undefined && grace !== null) {
    const n = Number(grace);
    if (!Number.isInteger(n) || n < 0)
      throw errors.badRequest(`gracePeriodSeconds: Invalid value: ${String(grace)}`);
    out.gracePeriodSeconds = n;
  }
  return out;
}

export type { KubeObject, ResourceDef };
