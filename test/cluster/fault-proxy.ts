/**
 * A thin fault-injecting proxy in front of the real kube-apiserver: what a test cannot ask of the
 * real server — an outage, answers of 500 or 429, a slow or dropped request, watches ended
 * mid-stream — happens here; everything else is the server's own answer, streamed through.
 *
 * Clients speak TLS to 127.0.0.1:<port> (a serving certificate of the cluster CA, so a client
 * trusts the proxy exactly as it would the server); the proxy speaks TLS to the server. Identities: the admin's token and real ServiceAccount tokens (TokenRequest) pass
 * through unchanged. A test user that no real credential names (a tenant, "relist") gets a token
 * of the proxy's that the proxy turns into the admin's credential plus `Impersonate-*` headers, so
 * the server authenticates the admin, then authorizes, admits and audits the impersonated user
 * with its own RBAC and admission, as it would the user.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { createServer, request as httpsRequest } from "node:https";
import type { Socket } from "node:net";
import type { KubeConfig } from "@kubernetes/client-node";
import type { ControlPlane } from "./control-plane.ts";
import { issueCertificate } from "./pki.ts";

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

/** Who a test acts as: "admin", a plain user name, or a user with groups and extra. */
export type UserSpec = string | { username: string; groups?: string[]; extra?: Record<string, string[]> };

export const NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name";

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
  /** The node a pod-bound token names. */
  node?: string;
  code: number;
  query: string;
  userAgent: string;
  injected?: true;
}

export interface RequestFilter {
  verb?: Verb;
  node?: string;
  resource?: string;
  group?: string;
  namespace?: string;
  name?: string;
  user?: string;
}

export interface FaultRule extends RequestFilter {
  status?: number;
  delayMs?: number;
  drop?: boolean;
  times?: number;
  when?: (request: RequestRecord) => boolean;
}

export interface FaultProxy {
  readonly url: string;
  readonly port: number;
  readonly requests: RequestRecord[];
  kubeConfig(user?: UserSpec): KubeConfig;
  token(user: UserSpec): string;
  countRequests(filter?: RequestFilter): number;
  resetRequests(): void;
  inject(rule: FaultRule): () => void;
  /** Close every connection (watches end mid-stream), refuse for `downtimeMs`, listen again on the same port. */
  restart(options?: { downtimeMs?: number }): Promise<void>;
  /** Ends every watch the proxy holds (one whose response headers have come back from upstream). */
  closeWatches(): void;
  /** Watches the proxy holds now; a watch counted by `countRequests` may not be held yet. */
  watchCount(filter?: RequestFilter): number;
  connectionCount(): number;
  stop(): Promise<void>;
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

/** The resource a REST path names, as the server's request-info resolver reads it. */
export function parseRequest(
  method: string,
  rawUrl: string,
): Pick<RequestRecord, "verb" | "resource" | "group" | "namespace" | "name" | "query"> {
  const [path = "", q = ""] = rawUrl.split("?");
  const query = q ? `?${q}` : "";
  const parts = path.split("/").filter(Boolean);
  let rest: string[];
  let group = "";
  if (parts[0] === "api" && parts.length >= 2) rest = parts.slice(2);
  else if (parts[0] === "apis" && parts.length >= 3) {
    group = parts[1] ?? "";
    rest = parts.slice(3);
  } else return { verb: "discovery", resource: "", group: "", query };
  let watchPath = false;
  if (rest[0] === "watch") {
    watchPath = true;
    rest = rest.slice(1);
  }
  let namespace: string | undefined;
  if (rest[0] === "namespaces" && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [resource, name, sub] = rest;
  if (!resource) return { verb: "discovery", resource: "", group, query };
  const params = new URLSearchParams(q);
  const isWatch = watchPath || params.get("watch") === "true" || params.get("watch") === "1";
  const verbs: Record<string, Verb> = { POST: "create", PUT: "update", PATCH: "patch" };
  let verb: Verb;
  if (method === "GET") verb = isWatch ? "watch" : name ? "get" : "list";
  else if (method === "DELETE") verb = name ? "delete" : "deletecollection";
  else verb = verbs[method] ?? "get";
  return {
    verb,
    resource: sub ? `${resource}/${sub}` : resource,
    group,
    ...(namespace ? { namespace } : {}),
    ...(name ? { name } : {}),
    query,
  };
}

/** The subject and node claim of a ServiceAccount JWT (read, not verified: the server verifies). */
function jwtIdentity(token: string): { user: string; node?: string } | undefined {
  const payload = token.split(".")[1];
  if (!payload) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
    const node = claims["kubernetes.io"]?.node?.name;
    return { user: String(claims.sub), ...(node ? { node } : {}) };
  } catch {
    return undefined;
  }
}

function statusBody(code: number, message: string) {
  const reasons: Record<number, string> = {
    410: "Expired",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
    403: "Forbidden",
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

export async function startFaultProxy(
  cp: ControlPlane,
  options: {
    port?: number;
    /** More names for the proxy's serving certificate (e.g. "IP:10.0.2.100", a guest's address for it). */
    extraSans?: string[];
  } = {},
): Promise<FaultProxy> {
  const upstream = new URL(cp.url);
  const impersonated = new Map<
    string,
    { username: string; groups: string[]; extra: Record<string, string[]> }
  >();
  const tokensByKey = new Map<string, string>();
  const requests: RequestRecord[] = [];
  const rules: (FaultRule & { used: number })[] = [];
  const sockets = new Set<Socket>();
  const watches = new Map<ServerResponse, { upRes: IncomingMessage; record: RequestRecord }>();
  let connections = 0;

  const token = (spec: UserSpec): string => {
    if (spec === "admin") return cp.adminToken;
    const u = typeof spec === "string" ? { username: spec } : spec;
    const info = { username: u.username, groups: u.groups ?? [], extra: u.extra ?? {} };
    const key = JSON.stringify(info);
    let tok = tokensByKey.get(key);
    if (!tok) {
      tok = `hive-proxy-${randomBytes(12).toString("hex")}`;
      tokensByKey.set(key, tok);
      impersonated.set(tok, info);
    }
    return tok;
  };

  const identify = (auth: string | undefined): { user: string; node?: string } => {
    const tok = auth?.replace(/^Bearer\s+/i, "") ?? "";
    if (tok === cp.adminToken) return { user: "admin" };
    const imp = impersonated.get(tok);
    if (imp)
      return {
        user: imp.username,
        ...(imp.extra[NODE_NAME_EXTRA]?.[0] ? { node: imp.extra[NODE_NAME_EXTRA][0] } : {}),
      };
    return jwtIdentity(tok) ?? { user: tok ? "unknown" : "anonymous" };
  };

  const upstreamHeaders = (req: IncomingMessage): Record<string, string | string[]> => {
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(req.headers))
      if (v !== undefined && k !== "host" && k !== "connection") headers[k] = v;
    headers.host = upstream.host;
    const tok = req.headers.authorization?.replace(/^Bearer\s+/i, "");
    const imp = tok ? impersonated.get(tok) : undefined;
    if (imp) {
      headers.authorization = `Bearer ${cp.adminToken}`;
      headers["impersonate-user"] = imp.username;
      if (imp.groups.length) headers["impersonate-group"] = imp.groups;
      for (const [k, v] of Object.entries(imp.extra))
        headers[`impersonate-extra-${encodeURIComponent(k)}`] = v;
    }
    return headers;
  };

  const forward = (req: IncomingMessage, res: ServerResponse, record: RequestRecord) => {
    const up = httpsRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: upstreamHeaders(req),
        ca: cp.caPem,
      },
      (upRes) => {
        record.code = upRes.statusCode ?? 0;
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        // The server flushes a watch's headers before its first event; so does the proxy (a client
        // waits for them to hold the watch, e.g. to abort it).
        res.flushHeaders();
        if (record.verb === "watch") {
          watches.set(res, { upRes, record });
          res.once("close", () => watches.delete(res));
        }
        upRes.pipe(res);
        res.once("close", () => upRes.destroy());
      },
    );
    up.on("error", (err) => {
      if (!res.headersSent) {
        res.writeHead(502, { "content-type": "application/json" });
        res.end(JSON.stringify(statusBody(502, `proxy: ${err.message}`)));
      } else res.destroy();
    });
    req.pipe(up);
    res.once("close", () => up.destroy());
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const who = identify(req.headers.authorization);
    const record: RequestRecord = {
      time: Date.now(),
      method: req.method ?? "GET",
      ...parseRequest(req.method ?? "GET", req.url ?? "/"),
      user: who.user,
      ...(who.node ? { node: who.node } : {}),
      code: 0,
      userAgent: String(req.headers["user-agent"] ?? ""),
    };
    requests.push(record);
    for (const rule of rules) {
      if (rule.times !== undefined && rule.used >= rule.times) continue;
      if (!matchesFilter(record, rule) || (rule.when && !rule.when(record))) continue;
      rule.used++;
      if (rule.delayMs) await new Promise((r) => setTimeout(r, rule.delayMs));
      if (rule.drop) {
        record.injected = true;
        req.socket.destroy();
        return;
      }
      if (rule.status) {
        record.injected = true;
        record.code = rule.status;
        res.writeHead(rule.status, { "content-type": "application/json" });
        res.end(
          JSON.stringify(
            statusBody(
              rule.status,
              `injected failure (${rule.status}) for ${record.verb} ${record.resource}`,
            ),
          ),
        );
        return;
      }
    }
    if (req.socket.destroyed) return;
    forward(req, res, record);
  };

  const serving = issueCertificate(cp.pki.dir, "fault-proxy", "/CN=hive-fault-proxy", {
    san: ["IP:127.0.0.1", "DNS:localhost", ...(options.extraSans ?? [])].join(","),
    usage: "server",
  });
  const tls = { key: readFileSync(serving.key), cert: readFileSync(serving.cert) };
  let server: Server;
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server = createServer(tls, (req, res) => void handle(req, res));
      server.on("secureConnection", (s) => {
        connections++;
        sockets.add(s);
        s.once("close", () => sockets.delete(s));
      });
      // Connections still in their TLS handshake too: one a client gave up on mid-handshake would
      // otherwise hold close() (and so an outage's restart) until the handshake timeout, 120 s.
      server.on("connection", (s: Socket) => {
        sockets.add(s);
        s.once("close", () => sockets.delete(s));
      });
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve((server.address() as { port: number }).port));
    });
  const close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const s of sockets) s.destroy();
    });
  const port = await listen(options.port ?? 0);
  const url = `https://127.0.0.1:${port}`;

  return {
    url,
    port,
    requests,
    token,
    kubeConfig(user: UserSpec = "admin") {
      return cp.kubeConfig(token(user), url);
    },
    countRequests: (filter = {}) => requests.filter((r) => matchesFilter(r, filter)).length,
    resetRequests: () => {
      requests.length = 0;
    },
    inject(rule) {
      const entry = { ...rule, used: 0 };
      rules.push(entry);
      return () => {
        const i = rules.indexOf(entry);
        if (i >= 0) rules.splice(i, 1);
      };
    },
    async restart({ downtimeMs = 0 } = {}) {
      await close();
      if (downtimeMs) await new Promise((r) => setTimeout(r, downtimeMs));
      await listen(port);
    },
    closeWatches() {
      // A clean end of each stream, as a watch timeout gives: the client sees the body end.
      for (const [res, { upRes }] of watches) {
        upRes.unpipe(res);
        upRes.destroy();
        res.end();
      }
    },
    watchCount: (filter = {}) => [...watches.values()].filter((w) => matchesFilter(w.record, filter)).length,
    connectionCount: () => connections,
    stop: close,
  };
}
