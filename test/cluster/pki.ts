/**
 * The keys and certificates one test control plane needs, made with openssl (a Debian package the
 * suite installs): a CA, the API server's serving certificate (for 127.0.0.1 and the in-cluster
 * names), the ServiceAccount token signing key, and client certificates for the kubelet and the
 * API server's kubelet client.
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

export interface Pki {
  dir: string;
  ca: { cert: string; key: string };
  /** Paths of the files the components read. */
  files: {
    caCert: string;
    caKey: string;
    serverCert: string;
    serverKey: string;
    saKey: string;
    saPub: string;
  };
}

function openssl(args: string[], cwd: string): void {
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
}

const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

/** A key and a certificate signed by the CA in `dir`: `<name>.key`, `<name>.crt`. */
export function issueCertificate(
  dir: string,
  name: string,
  subject: string,
  options: { san?: string; usage: "server" | "client" },
): { cert: string; key: string } {
  const ext = join(dir, `${name}.ext`);
  const lines = [
    "basicConstraints=CA:FALSE",
    "keyUsage=critical,digitalSignature,keyEncipherment",
    `extendedKeyUsage=${options.usage === "server" ? "serverAuth" : "clientAuth"}`,
  ];
  if (options.san) lines.push(`subjectAltName=${options.san}`);
  writeFileSync(ext, `${lines.join("\n")}\n`);
  openssl(["req", ...EC, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", subject], dir);
  openssl(
    ["x509", "-req", "-in", `${name}.csr`, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial"].concat([
      "-out",
      `${name}.crt`,
      "-days",
      "2",
      "-extfile",
      ext,
    ]),
    dir,
  );
  return { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
}

/** Everything under `dir`; the serving certificate also names `extraSans` (e.g. "IP:10.0.2.2"). */
export function makePki(dir: string, extraSans: string[] = []): Pki {
  openssl(
    ["req", "-x509", ...EC, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=hive-test-ca"],
    dir,
  );
  const san = [
    "IP:127.0.0.1",
    "IP:10.0.0.1",
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
    ...extraSans,
  ].join(",");
  const server = issueCertificate(dir, "apiserver", "/CN=kube-apiserver", { san, usage: "server" });
  openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "sa.key"], dir);
  openssl(["pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub"], dir);
  return {
    dir,
    ca: { cert: join(dir, "ca.crt"), key: join(dir, "ca.key") },
    files: {
      caCert: join(dir, "ca.crt"),
      caKey: join(dir, "ca.key"),
      serverCert: server.cert,
      serverKey: server.key,
      saKey: join(dir, "sa.key"),
      saPub: join(dir, "sa.pub"),
    },
  };
}
