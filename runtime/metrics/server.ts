/**
 * The agent's one observability port: GET /metrics (Prometheus text), /healthz (liveness)
 * and /readyz (readiness). `?verbose` lists each check, as the Kubernetes API server does.
 * Anything else is 404; only GET/HEAD are served.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import { HiveError } from "../../api/errors.ts";
import type { Logger } from "../log.ts";
import type { Health, HealthReport } from "./health.ts";

export interface MetricsServerOptions {
  registry: Registry;
  health: Health;
  /** TCP port; 0 picks a free one (tests). */
  port: number;
  /** Listen address; default all interfaces ("::" / "0.0.0.0"). */
  host?: string;
  logger?: Logger;
}

export interface MetricsServer {
  readonly port: number;
  readonly url: string;
  close(): Promise<void>;
}

function report(res: http.ServerResponse, report: HealthReport, verbose: boolean, head: boolean): void {
  const status = report.ok ? 200 : 503;
  const body = verbose
    ? `${report.checks.map((c) => `[${c.ok ? "+" : "-"}]${c.name} ${c.ok ? "ok" : `failed${c.message ? `: ${c.message}` : ""}`}`).join("\n")}\n${report.ok ? "ok" : "failed"}\n`
    : report.ok
      ? "ok\n"
      : `failed: ${report.checks
          .filter((c) => !c.ok)
          .map((c) => c.name)
          .join(", ")}\n`;
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" });
  res.end(head ? undefined : body);
}

export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  const { registry, health, logger } = options;
  let lastReadyOk: boolean | undefined;
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const head = req.method === "HEAD";
    if (req.method !== "GET" && !head) {
      res.writeHead(405, { allow: "GET, HEAD" }).end();
      return;
    }
    const verbose = url.searchParams.has("verbose");
    const handle = async (): Promise<void> => {
      switch (url.pathname) {
        case "/metrics": {
          const text = await registry.metrics();
          res.writeHead(200, { "content-type": registry.contentType });
          res.end(head ? undefined : text);
          return;
        }
        case "/healthz":
        case "/livez":
          report(res, await health.liveness(), verbose, head);
          return;
        case "/readyz": {
          const r = await health.readiness();
          // Log transitions only: probes run every few seconds.
          if (r.ok !== lastReadyOk) {
            lastReadyOk = r.ok;
            if (r.ok) logger?.info("agent ready");
            else logger?.warn("agent not ready", { failing: r.checks.filter((c) => !c.ok) });
          }
          report(res, r, verbose, head);
          return;
        }
        default:
          res.writeHead(404, { "content-type": "text/plain" }).end(head ? undefined : "not found\n");
      }
    };
    handle().catch((error: unknown) => {
      logger?.error("metrics endpoint failed", { path: url.pathname, error });
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
      res.end();
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        new HiveError("ConfigInvalid", `cannot listen on the metrics port: ${error.message}`, {
          object: `${options.host ?? "*"}:${options.port}`,
          hint: "choose a free port for the agent's metrics (the monitor's metricsPort option)",
          cause: error,
        }),
      ),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  const { port, address, family } = server.address() as AddressInfo;
  const host = family === "IPv6" ? `[${address}]` : address;
  logger?.info("metrics server listening", { port, address });
  return {
    port,
    url: `http://${host === "[::]" ? "127.0.0.1" : host === "0.0.0.0" ? "127.0.0.1" : host}:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}
