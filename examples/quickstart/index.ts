/**
 * Hive's user story as a Pulumi program: log every process that touches /etc/shadow in
 * pods labelled security=high, and post each alert to a callback.
 *
 *   pulumi config set hive:image registry.example.com/hive:0.1.0       # built from Hive's Dockerfile
 *   pulumi config set --secret hive:callbackUrl https://alerts.example.com/hive   # kept secret in the state
 *   pulumi up
 */
import { HiveMonitor } from "@hive-operator/hive";
import * as pulumi from "@pulumi/pulumi";

const config = new pulumi.Config("hive");

const monitor = new HiveMonitor("hive", {
  image: config.get("image") ?? "registry.example.com/hive:0.1.0",
  // A URL alone is short for { url }; a secret one (config.getSecret) stays secret in the state.
  callback: config.getSecret("callbackUrl") ?? "https://alerts.example.com/hive",
  traps: [
    {
      path: "/etc/shadow",
      match: { matchLabels: { security: "high" } },
    },
  ],
});

export const namespace = monitor.namespace;
export const daemonSet = monitor.daemonSetName;
export const policies = monitor.policyNames;
