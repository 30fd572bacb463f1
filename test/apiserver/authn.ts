/**
 * Authentication as kube-apiserver's bearer-token authenticator does it: a token names a user
 * (name, groups, extra). Tokens are opaque: a test gets one from `ApiServer.kubeConfig(user)`.
 * An unknown token is answered 401; every authenticated user is in `system:authenticated`.
 */
import { randomBytes } from "node:crypto";

export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
  extra: Record<string, string[]>;
}

/** Who a test acts as: a plain name ("admin" is a cluster admin, in system:masters) or a full user. */
export type UserSpec = string | { username: string; groups?: string[]; extra?: Record<string, string[]> };

/** The claim a pod-bound ServiceAccount token carries (ServiceAccountTokenPodNodeInfo, GA in 1.32). */
export const NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name";

/** The pod a pod-bound token was issued for. */
export const POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name";

/** A ServiceAccount's user, as a token bound to `pod` on `node` authenticates it. */
export function serviceAccountUser(namespace: string, name: string, node?: string, pod?: string): UserSpec {
  return {
    username: `system:serviceaccount:${namespace}:${name}`,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`],
    extra: {
      ...(node === undefined ? {} : { [NODE_NAME_EXTRA]: [node] }),
      ...(pod === undefined ? {} : { [POD_NAME_EXTRA]: [pod] }),
    },
  };
}

export function userInfoOf(spec: UserSpec): UserInfo {
  const base = typeof spec === "string" ? { username: spec } : spec;
  const groups = [...(base.groups ?? [])];
  if (typeof spec === "string" && spec === "admin") groups.push("system:masters");
  if (!groups.includes("system:authenticated")) groups.push("system:authenticated");
  return { username: base.username, groups, extra: { ...(typeof spec === "string" ? {} : spec.extra) } };
}

export class Authenticator {
  private readonly byToken = new Map<string, UserInfo>();
  private readonly byKey = new Map<string, string>();

  /** A token for `spec`: the same user always gets the same token. */
  tokenFor(spec: UserSpec): string {
    const info = userInfoOf(spec);
    const key = JSON.stringify(info);
    const known = this.byKey.get(key);
    if (known) return known;
    const token = randomBytes(16).toString("hex");
    this.byKey.set(key, token);
    this.byToken.set(token, info);
    return token;
  }

  /** The user of an `Authorization: Bearer …` header, or undefined (401). */
  authenticate(header: string | undefined): UserInfo | undefined {
    const m = header?.match(/^Bearer\s+(\S+)$/i);
    return m ? this.byToken.get(m[1] as string) : undefined;
  }
}

/** A named user in system:masters: protocol tests that count requests per user, not test RBAC. */
export function clusterAdmin(username: string): UserSpec {
  return { username, groups: ["system:masters"] };
}
