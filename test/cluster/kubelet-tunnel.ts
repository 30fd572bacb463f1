/**
 * How the real kube-apiserver reaches a kubelet inside a QEMU guest: its egress selector sends
 * every connection to a node (`kubectl exec`, `logs`, port-forward) as an HTTP CONNECT to this
 * tunnel on a unix socket, which opens it to the loopback port QEMU forwards to the guest's
 * kubelet. Only the node addresses a test registered are reachable; any other target is refused
 * (403), so nothing but the guests' forwarded ports is ever dialled.
 *
 * The tunnel runs in a child process of its own: a test that runs kubectl synchronously blocks its
 * own event loop, and a tunnel there would never answer the API server (a deadlock).
 */
import { type ChildProcess, fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface KubeletTunnel {
  /** The unix socket the egress selector configuration names. */
  readonly socket: string;
  /** Routes `address:port` (the node's InternalIP and kubelet port) to 127.0.0.1:`hostPort`. */
  route(target: string, hostPort: number): Promise<void>;
  stop(): Promise<void>;
}

type Message = { route: [string, number] } | { listening: true } | { routed: string };

/** The tunnel itself (in the child): CONNECT to a routed target is piped to its loopback port. */
function serve(socket: string): void {
  const routes = new Map<string, number>();
  const server = createServer((_req, res) => {
    res.writeHead(405).end("CONNECT only\n");
  });
  server.on("connect", (req, client: Socket, head: Buffer) => {
    const port = routes.get(req.url ?? "");
    if (port === undefined) {
      process.stderr.write(`kubelet tunnel: refused CONNECT ${req.url}\n`);
      client.end("HTTP/1.1 403 Forbidden\r\n\r\n");
      return;
    }
    const upstream = connect(port, "127.0.0.1", () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on("error", () => client.destroy());
    client.on("error", () => upstream.destroy());
  });
  process.on("message", (m: Message) => {
    if ("route" in m) {
      routes.set(m.route[0], m.route[1]);
      process.send?.({ routed: m.route[0] } satisfies Message);
    }
  });
  process.on("disconnect", () => process.exit(0));
  server.listen(socket, () => process.send?.({ listening: true } satisfies Message));
}

export async function startKubeletTunnel(): Promise<KubeletTunnel> {
  const dir = mkdtempSync(join(tmpdir(), "hive-tunnel-"));
  const socket = join(dir, "tunnel.sock");
  const child: ChildProcess = fork(import.meta.filename, [socket], {
    execArgv: [],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const next = (want: (m: Message) => boolean) =>
    new Promise<void>((resolve, reject) => {
      const onMessage = (m: Message) => {
        if (!want(m)) return;
        child.off("message", onMessage);
        resolve();
      };
      child.on("message", onMessage);
      child.once("exit", (code) => reject(new Error(`the kubelet tunnel exited (${code})`)));
    });
  await next((m) => "listening" in m);
  return {
    socket,
    async route(target, hostPort) {
      const done = next((m) => "routed" in m && m.routed === target);
      child.send({ route: [target, hostPort] } satisfies Message);
      await done;
    },
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

if (process.argv[1] === import.meta.filename && process.argv[2]) serve(process.argv[2]);
