/**
 * The real API server's audit log (`--audit-log-format=json`, level Metadata): one JSON line per
 * request at ResponseComplete (ResponseStarted for watches). Tests read it to learn which request
 * was refused, by whom, and why (the authorization and admission annotations).
 */
import { existsSync, readFileSync } from "node:fs";

export interface AuditEvent {
  auditID: string;
  stage: "ResponseStarted" | "ResponseComplete" | "Panic";
  verb: string;
  requestURI: string;
  user: { username: string; groups?: string[]; extra?: Record<string, string[]> };
  impersonatedUser?: { username: string; groups?: string[]; extra?: Record<string, string[]> };
  userAgent?: string;
  objectRef?: {
    resource?: string;
    subresource?: string;
    namespace?: string;
    name?: string;
    apiGroup?: string;
  };
  responseStatus?: { code?: number; reason?: string; message?: string };
  annotations?: Record<string, string>;
  requestReceivedTimestamp: string;
}

export interface AuditFilter {
  verb?: string;
  resource?: string;
  namespace?: string;
  name?: string;
  /** The acting user (the impersonated one when a request impersonates). */
  user?: string | RegExp;
  /** Only answers with one of these codes. */
  codes?: number[];
}

/** Codes a test must declare when it expects them: the server refused the request. */
export const REFUSAL_CODES = [401, 403, 422];

export function actingUser(e: AuditEvent): string {
  return e.impersonatedUser?.username ?? e.user.username;
}

export function matchesAudit(e: AuditEvent, f: AuditFilter): boolean {
  const user = actingUser(e);
  const resource = e.objectRef?.subresource
    ? `${e.objectRef.resource}/${e.objectRef.subresource}`
    : e.objectRef?.resource;
  return (
    (f.verb === undefined || e.verb === f.verb) &&
    (f.resource === undefined || resource === f.resource) &&
    (f.namespace === undefined || e.objectRef?.namespace === f.namespace) &&
    (f.name === undefined || e.objectRef?.name === f.name) &&
    (f.user === undefined || (typeof f.user === "string" ? user === f.user : f.user.test(user))) &&
    (f.codes === undefined || f.codes.includes(e.responseStatus?.code ?? 0))
  );
}

export class AuditLog {
  private offset = 0;
  private readonly seen: AuditEvent[] = [];
  readonly path: string;
  constructor(path: string) {
    this.path = path;
  }

  /** Every event written so far (the file is read from where the last call stopped). */
  events(): AuditEvent[] {
    if (!existsSync(this.path)) return this.seen;
    const text = readFileSync(this.path, "utf8");
    const end = text.lastIndexOf("\n") + 1;
    for (const line of text.slice(this.offset, end).split("\n")) {
      if (line.trim()) this.seen.push(JSON.parse(line) as AuditEvent);
    }
    this.offset = end;
    return this.seen;
  }

  /** A position in the log; `since(mark)` gives only what came after. */
  mark(): number {
    return this.events().length;
  }

  since(mark: number, filter: AuditFilter = {}): AuditEvent[] {
    return this.events()
      .slice(mark)
      .filter((e) => e.stage === "ResponseComplete" && matchesAudit(e, filter));
  }

  find(filter: AuditFilter = {}): AuditEvent[] {
    return this.since(0, filter);
  }

  /** Requests the server refused (401/403/422) that match `filter`. */
  refusals(filter: AuditFilter = {}, mark = 0): AuditEvent[] {
    return this.since(mark, { ...filter, codes: REFUSAL_CODES });
  }

  /** One line per event, for an assertion message. */
  static describe(events: AuditEvent[]): string {
    return events
      .map((e) => {
        const o = e.objectRef ?? {};
        const why = e.responseStatus?.message ?? e.annotations?.["authorization.k8s.io/reason"] ?? "";
        return `${actingUser(e)} ${e.verb} ${o.resource ?? e.requestURI}${o.subresource ? `/${o.subresource}` : ""} ${o.namespace ?? ""}/${o.name ?? ""} → ${e.responseStatus?.code}: ${why}`;
      })
      .join("\n");
  }
}
