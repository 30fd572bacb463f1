/**
 * Inside a QEMU guest (test/kernel/vm.ts): the host's API server, as guest-api.ts on the host set
 * it up. `guestNetworkUp` brings up the guest's one network device (QEMU's restricted user-mode
 * network: the only address that leads anywhere is the API server's); `guestApi` reads where the
 * server is, its CA and the admin's token, and asks the host, through files in /hive-out, for what
 * only the host can do (install Hive, mint agent tokens, an outage, a fault).
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import type { HiveMonitorArgs } from "../../component/index.ts";
import {
  ANSWER_DIR,
  GUEST_ADDRESS,
  GUEST_API_ENV,
  type GuestAnswer,
  type GuestApiConfig,
  type GuestFaultRule,
  type GuestRequests,
  REQUEST_DIR,
} from "./guest-protocol.ts";

const OUT = "/hive-out";

/** The guest's network device up, with its address (the guest boots with every link down). */
export async function guestNetworkUp(): Promise<void> {
  // Debian builds virtio_net as a module; the initramfs loads only what the root share needs.
  try {
    execFileSync("modprobe", ["virtio_net"], { stdio: "pipe" });
  } catch {
    // built in, or already loaded
  }
  const deadline = Date.now() + 60_000;
  while (!existsSync("/sys/class/net/eth0")) {
    if (Date.now() > deadline) throw new Error("no eth0 in the guest: the QEMU network device is missing");
    await new Promise((r) => setTimeout(r, 100));
  }
  execFileSync("ip", ["link", "set", "lo", "up"]);
  execFileSync("ip", ["link", "set", "eth0", "up"]);
  execFileSync("ip", ["addr", "replace", `${GUEST_ADDRESS}/24`, "dev", "eth0"]);
}

export interface OutageHandle {
  /** Resolves when the proxy listens again. */
  over(): Promise<void>;
}

export interface GuestApi extends GuestApiConfig {
  /** The admin, through the host's fault proxy. */
  kubeConfig(token?: string): KubeConfig;
  /** Hive installed on the host by the real kubectl, from the component's rendering of `args`. */
  install(args: HiveMonitorArgs): Promise<{ namespace: string; agentUser: string }>;
  /** A TokenRequest token of the agent's ServiceAccount bound to `pod` on `node` (both made if missing). */
  agentToken(node: string, pod: string): Promise<string>;
  /** Cuts the API server off now (connections and watches end) for `downtimeMs`. */
  outage(downtimeMs: number): Promise<OutageHandle>;
  /** A fault of the host's proxy; the returned function removes it. */
  inject(rule: GuestFaultRule): Promise<() => Promise<void>>;
}

/**
 * Waits until the API server answers the guest at all (any HTTP answer counts): the first
 * connection goes through QEMU, socat and a TLS handshake under emulation, and on a busy host it can
 * outlast one connect timeout ("fetch failed"). Later calls meet a warm path.
 */
export async function untilApiAnswers(core: CoreV1Api, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answered = await core.listNamespace({ limit: 1 }).then(
      () => true,
      (err: { code?: number }) => typeof err.code === "number",
    );
    if (answered) return;
    if (Date.now() > deadline)
      throw new Error(`the API server did not answer the guest within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 2000));
  }
}

let sequence = 0;

/** Asks the host and waits for its answer (bounded: a host that stopped answering fails the call). */
async function ask<K extends keyof GuestRequests>(
  op: K,
  args: GuestRequests[K]["args"],
  timeoutMs = 300_000,
): Promise<GuestRequests[K]["answer"]> {
  const name = `${process.pid}-${++sequence}-${op}.json`;
  const requests = join(OUT, REQUEST_DIR);
  mkdirSync(requests, { recursive: true });
  // Written aside, then renamed: the host never reads half a request.
  writeFileSync(join(requests, `${name}.tmp`), JSON.stringify({ op, args }));
  renameSync(join(requests, `${name}.tmp`), join(requests, name));
  const file = join(OUT, ANSWER_DIR, name);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (existsSync(file)) {
      const answer = JSON.parse(readFileSync(file, "utf8")) as GuestAnswer;
      if (!answer.ok) throw new Error(`the host could not ${op}: ${answer.error}`);
      return answer.value as GuestRequests[K]["answer"];
    }
    if (Date.now() > deadline) throw new Error(`the host did not answer ${op} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export function guestApi(): GuestApi {
  const raw = process.env[GUEST_API_ENV];
  if (!raw)
    throw new Error(`${GUEST_API_ENV} is not set: the host test starts the API server (guest-api.ts)`);
  const config = JSON.parse(raw) as GuestApiConfig;
  return {
    ...config,
    kubeConfig(token = config.adminToken) {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [
          { name: "host", server: config.url, caData: Buffer.from(config.caPem).toString("base64") },
        ],
        users: [{ name: "user", token }],
        contexts: [{ name: "host", cluster: "host", user: "user" }],
        currentContext: "host",
      });
      return kc;
    },
    install: (args) => ask("install", { args }),
    agentToken: async (node, pod) => (await ask("agentToken", { node, pod })).token,
    async outage(downtimeMs) {
      const { id } = await ask("outage", { downtimeMs });
      return {
        over: async () => {
          await ask("outageOver", { id }, downtimeMs + 300_000);
        },
      };
    },
    async inject(rule) {
      const { id } = await ask("inject", { rule });
      return async () => {
        await ask("removeInjection", { id });
      };
    },
  };
}
