import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import { FORMATS } from "../../api/formats.ts";
import { publishedSchemas } from "../../scripts/gen-schemas.ts";

describe("published JSON Schemas", () => {
  it.each(Object.keys(publishedSchemas()))("%s is generated from api/ and up to date", (file) => {
    expect(readFileSync(new URL(`../../${file}`, import.meta.url), "utf8")).toBe(publishedSchemas()[file]);
  });

  it("the alert schema, read by an independent validator, accepts the reference example with Hive's additions", () => {
    const ajv = new Ajv2020.default({ strict: true });
    for (const [name, check] of Object.entries(FORMATS)) ajv.addFormat(name, check);
    const validate = ajv.compile(
      JSON.parse(readFileSync(new URL("../../schemas/alert.schema.json", import.meta.url), "utf8")),
    );
    const alert = {
      id: "0b9f5a6e-1d1f-4c51-9d7a-3f1c2b9e8a71",
      timestamp: "2025-07-25T08:14:22Z",
      hive_policy_name: "hive-sample-policy",
      hive_policy_namespace: "hive-operator-system",
      trap_id: "c4705ec263cc353100b6f18a129e32b67b79171b",
      severity: "critical",
      labels: { team: "payments" },
      cluster: { name: "prod-eu-1" },
      metadata: {
        path: "/secret.txt",
        inode: 13667586,
        device: "0:52",
        mask: 34,
        accesses: ["read", "open"],
        count: 3,
        kernel_id: "fc9a30d5-6140-4dd1-b8ef-c638f19ebd71",
      },
      pod: {
        name: "nginx-pod",
        namespace: "default",
        container: {
          id: "containerd://9d7df722223a4ad7f67f2afef5fbc0e2",
          name: "nginx",
          image: "docker.io/library/nginx:1.27",
        },
        labels: { app: "nginx", "pod-template-hash": "7d9c5b8f4" },
        workload: { kind: "Deployment", name: "nginx" },
      },
      node: { name: "hive-worker2" },
      process: {
        pid: 61116,
        tgid: 61164,
        uid: 0,
        gid: 0,
        comm: "cat",
        exe: "/usr/bin/cat",
        exe_source: "exec",
        exec_time: "2024-05-01T12:00:00.000000Z",
        ppid: 61100,
        parent: { pid: 61100, comm: "sh", exe: "/usr/bin/dash", exe_source: "exec" },
        ancestors: [{ pid: 1, exe: "/usr/sbin/sshd", exe_source: "seed" }],
      },
    };
    expect(validate(alert), JSON.stringify(validate.errors)).toBe(true);
    // The reference's misspelt `contianer` is not accepted: receivers can rely on `container`.
    const misspelt = { ...alert, pod: { name: "p", namespace: "n", contianer: alert.pod.container } };
    expect(validate(misspelt)).toBe(false);
  });
});
