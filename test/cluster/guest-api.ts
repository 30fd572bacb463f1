/**
 * A real control plane on the host for a QEMU guest (test/kernel/vm.ts) whose tests need an API
 * server: the guest reaches the fault proxy, and nothing else, through QEMU's user-mode network
 * restricted to one forwarded address (10.0.2.100:6443 → the proxy's loopback port, each
 * connection through socat). The proxy's certificate names that address; the guest gets the URL,
 * the cluster CA and the admin's token in its environment (guest-client.ts reads them).
 *
 * What only the host can do — install Hive with the real kubectl, mint pod-bound agent tokens
 * (TokenRequest), cut the proxy for an outage, inject a fault — the guest asks for through the
 * shared /hive-out directory: one JSON file per request, one per answer (guest-client.ts writes
 * and reads them, `serve` answers). The audit log stays on the host: `assertNoRefusals` after the
 * guest is done.
 *
 *   const g = await startGuestApi();
 *   const boot = bootVm({ kernel, outDir, command, env: { ...g.env }, qemuArgs: g.qemuArgs });
 *   const desk = g.serve(outDir);
 *   await boot; desk.stop();
 *   g.assertNoRefusals();
 *   await g.stop();
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ControlPlaneOptions } from "./control-plane.ts";
import { WITHOUT_KUBELET_CONTROLLERS } from "./controllers.ts";
import {
  ANSWER_DIR,
  GUEST_API_ENV,
  GUEST_API_HOST,
  GUEST_API_PORT,
  GUEST_API_URL,
  type GuestAnswer,
  type GuestApiConfig,
  type GuestRequest,
  type GuestRequests,
  REQUEST_DIR,
} from "./guest-protocol.ts";
import { type Installed, installHive } from "./install.ts";
import { type RealApi, startRealApi } from "./real-api.ts";

export interface GuestApi {
  readonly api: RealApi;
  /** QEMU's network for the guest: user mode, restricted, one address forwarded to the proxy. */
  readonly qemuArgs: string[];
  /** The guest's environment: GUEST_API_ENV. */
  readonly env: Record<string, string>;
  /** Hive as the guest's `install` requests installed it. */
  readonly installs: Installed[];
  /** Answers the guest's requests under `outDir` (its /hive-out) until stopped. */
  serve(outDir: string): { stop(): void };
  /** Throws, naming them, when the server refused an agent request of any install. */
  assertNoRefusals(): void;
  stop(): Promise<void>;
}

/** Why a guest cannot reach a host API server here, or null. */
export function guestApiUnavailable(): string | null {
  if (spawnSync("socat", ["-V"], { encoding: "utf8" }).status !== 0)
    return "socat is not installed (apt-get install socat): QEMU forwards the guest's API connections through it";
  return null;
}

export async function startGuestApi(options: ControlPlaneOptions = {}): Promise<GuestApi> {
  const missing = guestApiUnavailable();
  if (missing) throw new Error(missing);
  const api = await startRealApi({
    controllers: WITHOUT_KUBELET_CONTROLLERS,
    ...options,
    extraSans: [...(options.extraSans ?? []), `IP:${GUEST_API_HOST}`],
  });
  const installs: Installed[] = [];
  const outages = new Map<number, Promise<void>>();
  const injections = new Map<number, () => void>();
  let next = 0;

  const handlers: {
    [K in keyof GuestRequests]: (args: GuestRequests[K]["args"]) => Promise<GuestRequests[K]["answer"]>;
  } = {
    async install({ args }) {
      const installed = installHive(api.cp, args);
      installs.push(installed);
      return { namespace: installed.namespace, agentUser: installed.agentUser };
    },
    async agentToken({ node, pod }) {
      const installed = installs.at(-1);
      if (!installed) throw new Error("agentToken before install");
      return { token: await installed.agentToken(node, pod) };
    },
    async outage({ downtimeMs }) {
      const id = ++next;
      // The proxy stops listening and cuts every connection before restart() first yields.
      const back = api.restart({ downtimeMs });
      back.catch(() => undefined);
      outages.set(id, back);
      return { id };
    },
    async outageOver({ id }) {
      await outages.get(id);
      return {};
    },
    async inject({ rule }) {
      const { queryIncludes, ...fault } = rule;
      const id = ++next;
      injections.set(
        id,
        api.inject({
          ...fault,
          ...(queryIncludes ? { when: (r) => decodeURIComponent(r.query).includes(queryIncludes) } : {}),
        }),
      );
      return { id };
    },
    async removeInjection({ id }) {
      injections.get(id)?.();
      injections.delete(id);
      return {};
    },
  };

  const answer = async (file: string): Promise<GuestAnswer> => {
    try {
      const request = JSON.parse(readFileSync(file, "utf8")) as GuestRequest;
      const handler = handlers[request.op] as (args: unknown) => Promise<unknown>;
      if (!handler) throw new Error(`unknown request ${JSON.stringify(request.op)}`);
      return { ok: true, value: await handler(request.args) };
    } catch (error) {
      return { ok: false, error: error instanceof Error ? (error.stack ?? error.message) : String(error) };
    }
  };

  return {
    api,
    qemuArgs: [
      "-netdev",
      [
        "user",
        "id=hive0",
        "restrict=on",
        "net=10.0.2.0/24",
        `guestfwd=tcp:${GUEST_API_HOST}:${GUEST_API_PORT}-cmd:socat - TCP:127.0.0.1:${api.port}`,
      ].join(","),
      "-device",
      "virtio-net-pci,netdev=hive0",
    ],
    env: {
      [GUEST_API_ENV]: JSON.stringify({
        url: GUEST_API_URL,
        caPem: api.cp.caPem,
        adminToken: api.cp.adminToken,
      } satisfies GuestApiConfig),
    },
    installs,
    serve(outDir) {
      const requests = join(outDir, REQUEST_DIR);
      const answers = join(outDir, ANSWER_DIR);
      const seen = new Set<string>();
      const poll = () => {
        if (!existsSync(requests)) return;
        for (const name of readdirSync(requests)) {
          if (!name.endsWith(".json") || seen.has(name)) continue;
          seen.add(name);
          void answer(join(requests, name)).then((a) => {
            mkdirSync(answers, { recursive: true });
            // Written aside, then renamed: the guest never reads half an answer.
            writeFileSync(join(answers, `${name}.tmp`), JSON.stringify(a));
            renameSync(join(answers, `${name}.tmp`), join(answers, name));
          });
        }
      };
      const timer = setInterval(poll, 100);
      return { stop: () => clearInterval(timer) };
    },
    assertNoRefusals() {
      for (const installed of installs) installed.assertNoRefusals();
    },
    async stop() {
      for (const remove of injections.values()) remove();
      await Promise.allSettled(outages.values());
      await api.stop();
    },
  };
}
