/**
 * The parts of a `hive watch` session on one machine: a callback receiver on 127.0.0.1, the
 * `hive watch` process with its output collected, and a poll until something happened.
 * Shared by the demo (scenario.ts) and the CLI test's guest scenario.
 */
import { type ChildProcess, spawn } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";

/** The hive CLI's entry point, run with this Node. */
export const HIVE_CLI = new URL("../../runtime/cli/main.ts", import.meta.url).pathname;

export interface Delivery {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface CallbackReceiver {
  /** http://127.0.0.1:<port><path> */
  url: string;
  /** Every request, in arrival order (each answered 204). */
  deliveries: Delivery[];
  close(): void;
}

export function startCallbackReceiver(path: string): Promise<CallbackReceiver> {
  const deliveries: Delivery[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      body += chunk;
    });
    req.on("end", () => {
      deliveries.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      resolve({ url: `http://127.0.0.1:${port}${path}`, deliveries, close: () => server.close() });
    });
  });
}

export interface WatchProcess {
  child: ChildProcess;
  /** What watch printed on stdout so far (the alerts, one JSON line each). */
  readonly stdout: string;
  /** What watch printed on stderr so far (its JSON log lines). */
  readonly stderr: string;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
}

/** Starts `hive watch <args>`; `env` replaces this process's environment when given. */
export function spawnWatch(args: string[], env?: NodeJS.ProcessEnv): WatchProcess {
  const child = spawn(process.execPath, [HIVE_CLI, "watch", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    ...(env ? { env } : {}),
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
  });
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  return {
    child,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    exited: new Promise((resolve) => child.on("exit", (code) => resolve(code))),
  };
}

/** Polls `check` every 50 ms; false when `timeoutMs` passed first. */
export function until(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve) => {
    const tick = () => {
      if (check()) resolve(true);
      else if (Date.now() > deadline) resolve(false);
      else setTimeout(tick, 50);
    };
    tick();
  });
}
