/** The agent image options: `image`, `imagePullPolicy`, `imagePullSecrets`. */
import { type HiveMonitorValues, PULL_POLICIES } from "../args.ts";
import { type Checker, DNS_SUBDOMAIN } from "./checker.ts";
import type { HiveConfig } from "./hive-config.ts";

const IMAGE = /^[^\s]+$/;

export function checkImage(
  c: Checker,
  args: HiveMonitorValues,
): Pick<HiveConfig, "image" | "imagePullPolicy" | "imagePullSecrets"> {
  if (typeof args.image !== "string" || !IMAGE.test(args.image)) {
    c.add(
      "image",
      'is required: the agent image built from Hive\'s Dockerfile, e.g. "registry.example.com/hive:0.1.0"',
    );
  }
  const imagePullPolicy = args.imagePullPolicy ?? "IfNotPresent";
  c.oneOf("imagePullPolicy", imagePullPolicy, PULL_POLICIES);
  const imagePullSecrets = args.imagePullSecrets ?? [];
  if (!Array.isArray(imagePullSecrets)) c.add("imagePullSecrets", "must be a list of Secret names");
  else
    for (const [i, s] of imagePullSecrets.entries())
      c.name(`imagePullSecrets[${i}]`, s, DNS_SUBDOMAIN, "a Secret name");
  return { image: args.image, imagePullPolicy, imagePullSecrets };
}
