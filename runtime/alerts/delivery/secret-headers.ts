/**
 * Extra callback headers (e.g. `Authorization: Bearer …`) come from a Kubernetes Secret,
 * never from plain policy fields: each key of the Secret's data is a header name, its
 * value the header value. Read once at start-up (and on demand) through the real
 * agent's CoreApi; the pipeline only ever sees resolved values.
 */

import { HiveError } from "../../../api/errors.ts";
import type { CoreApi } from "../../k8s/kube-apis.ts";

/** RFC 9110 token characters: what a header name may be made of. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Checks header names and values; a CR, LF or NUL in a value could smuggle a header. */
export function validateHeaders(headers: Record<string, string>, object: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name)) {
      throw new HiveError("ConfigInvalid", `"${name}" is not a valid HTTP header name`, {
        object,
        hint: "name each key of the Secret after the header it sets, e.g. Authorization",
      });
    }
    if (/[\r\n\0]/.test(value)) {
      throw new HiveError("ConfigInvalid", `the value of header "${name}" contains a line break or NUL`, {
        object,
        hint: "store the header value without a trailing newline (kubectl create secret generic --from-literal)",
      });
    }
    out[name] = value;
  }
  return out;
}

type Secret = Awaited<ReturnType<CoreApi["readNamespacedSecret"]>>;

/** Reads a Secret; a failure names it as `what` and, when it is missing, says how to create it. */
async function readSecret(
  core: CoreApi,
  namespace: string,
  name: string,
  what: string,
  createHint: string,
): Promise<Secret> {
  try {
    return await core.readNamespacedSecret({ namespace, name });
  } catch (error) {
    const code = (error as { code?: number }).code;
    throw new HiveError("ApiRequestFailed", code === 404 ? `${what} not found` : `cannot read the ${what}`, {
      object: `secret ${namespace}/${name}`,
      hint: code === 404 ? createHint : "check the agent's RBAC allows get on this Secret",
      status: code,
      cause: error,
    });
  }
}

export async function loadSecretHeaders(
  core: CoreApi,
  namespace: string,
  name: string,
): Promise<Record<string, string>> {
  const object = `secret ${namespace}/${name}`;
  const secret = await readSecret(
    core,
    namespace,
    name,
    "callback headers Secret",
    "create the Secret in the agent's namespace, or remove headersSecret from the monitor",
  );
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(secret.data ?? {}))
    headers[key] = Buffer.from(value, "base64").toString("utf8");
  for (const [key, value] of Object.entries(secret.stringData ?? {})) headers[key] = value;
  return validateHeaders(headers, object);
}

/** One value of a Secret (e.g. the HMAC key), decoded; errors name the Secret and key. */
export async function loadSecretValue(
  core: CoreApi,
  namespace: string,
  name: string,
  key: string,
): Promise<Buffer> {
  const object = `secret ${namespace}/${name}`;
  const secret = await readSecret(
    core,
    namespace,
    name,
    "signing Secret",
    "create the Secret in the agent's namespace",
  );
  const value = secret.data?.[key];
  if (value === undefined || value.length === 0) {
    throw new HiveError("ConfigInvalid", `the Secret has no key "${key}"`, {
      object,
      hint: `add the key, e.g. kubectl create secret generic ${name} --from-literal=${key}=<random 32 bytes>`,
    });
  }
  return Buffer.from(value, "base64");
}
