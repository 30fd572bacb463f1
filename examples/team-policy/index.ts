/**
 * A team adds traps to a Hive monitor someone else deployed: a HivePolicy in the team's own
 * namespace, typed like the monitor's traps. The agents follow HivePolicies in every namespace;
 * one outside the monitor's namespace traps only the pods of its own (docs/security-model.md: Multi-tenancy).
 *
 *   pulumi up   (in a project whose Pulumi.yaml has `main: examples/team-policy/`)
 */
import { HivePolicy } from "@hive-operator/hive";

const policy = new HivePolicy("payments-canaries", {
  namespace: "payments",
  traps: [
    // A canary credential nobody should ever read: any access is an intrusion signal.
    {
      path: "/srv/app/.aws/credentials",
      create: true,
      mode: 0o400,
      match: { namespace: "payments", containerName: /api|worker/ },
      callback: "https://alerts.example.com/payments",
    },
    // Writes to the application's own configuration, in every payments pod.
    { path: "/srv/app/config.yaml", accesses: ["write", "append"], match: { namespace: "payments" } },
  ],
});

export const name = policy.metadata.name;
