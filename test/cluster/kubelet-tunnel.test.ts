import { request } from "node:http";
import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type KubeletTunnel, startKubeletTunnel } from "./kubelet-tunnel.ts";

/** CONNECT through the tunnel's socket, as kube-apiserver's egress selector does; resolves the status. */
function connectThrough(tunnel: KubeletTunnel, target: string): Promise<{ status: number; echoed?: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: tunnel.socket, method: "CONNECT", path: target });
    req.on("connect", (res, socket) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        resolve({ status: res.statusCode ?? 0 });
        return;
      }
      socket.once("data", (d) => {
        socket.destroy();
        resolve({ status: 200, echoed: d.toString() });
      });
      socket.write("ping");
    });
    req.on("error", reject);
    req.end();
  });
}

describe("the kubelet tunnel", () => {
  let tunnel: KubeletTunnel;
  let echoPort = 0;
  const echo = createServer((s) => s.on("data", (d) => s.write(d)));
  beforeAll(async () => {
    await new Promise<void>((r) => echo.listen(0, "127.0.0.1", r));
    echoPort = (echo.address() as { port: number }).port;
    tunnel = await startKubeletTunnel();
  });
  afterAll(async () => {
    await tunnel?.stop();
    echo.close();
  });

  it("refuses a target no node registered, whatever the API server is asked to dial", async () => {
    expect((await connectThrough(tunnel, `127.0.0.1:${echoPort}`)).status).toBe(403);
    expect((await connectThrough(tunnel, "10.0.2.15:10250")).status).toBe(403);
  });

  it("pipes a registered node's kubelet address to its forwarded loopback port", async () => {
    await tunnel.route("10.0.2.15:10250", echoPort);
    expect(await connectThrough(tunnel, "10.0.2.15:10250")).toEqual({ status: 200, echoed: "ping" });
    expect((await connectThrough(tunnel, "10.0.2.16:10250")).status).toBe(403);
  });
});
