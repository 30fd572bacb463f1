/**
 * How the real kube-apiserver reaches a kubelet inside a QEMU guest: its egress selector sends
 * every connection to a node (`kubectl exec`, `logs`, port-forward) as an HTTP CONNECT to this
 * tunnel on a unix socket, which opens it to the loopback port QEMU forwards to the guest's kubelet.
 * Only the node addresses a test registered are reachable; any other target is refused (403), so
 * nothing but the guests' forwarded ports is ever dialled.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface KubeletTunnel {
  /** The unix socket the egress selector configuration names. */
  readonly socket: string;
  /** Routes `address:port` (the node's InternalIP and kubelet port) to 127.0.0.1:`hostPort`. */
  route(target: string, hostPort: number): void;
  /** Targets asked for that no route allowed. */
  readonly refused: string[];
  stop(): Promise<void>;
}

export async function startKubeletTunnel(): Promise<KubeletTunnel> {
  const routes = new Map<string, number>();
  const refused: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((_req, res) => {
    res.writeHead(405).end("CONNECT only\n");
  });
  server.on("connect", (req, client: Socket, head: Buffer) => {
    const target = req.url ?? "";
    const port = routes.get(target);
    if (port === undefined) {
      refused.push(target);
      client.end("HTTP/1.1 403 Forbidden\r\n\r\n");
      return;
    }
    const upstream = connect(port, "127.0.0.1", () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.once("close", () => sockets.delete(s));
    }
    upstream.on("error", () => client.destroy());
    client.on("error", () => upstream.destroy());
  });
  const dir = mkdtempSync(join(tmpdir(), "hive-tunnel-"));
  const socket = join(dir, "tunnel.sock");
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return {
    socket,
    route: (target, hostPort) => routes.set(target, hostPort),
    refused,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => {
          rmSync(dir, { recursive: true, force: true });
          resolve();
        });
      }),
  };
}
