/** The host's Debian mirror, read from its apt sources, for the Debian stand-in and the arm64 base. */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

interface AptSource {
  types: string[];
  uris: string[];
  suites: string[];
  components: string[];
}

/** The host's apt sources, one-line and deb822 formats. */
function hostAptSources(): AptSource[] {
  const files = ["/etc/apt/sources.list"];
  if (existsSync("/etc/apt/sources.list.d"))
    for (const f of readdirSync("/etc/apt/sources.list.d").sort())
      files.push(join("/etc/apt/sources.list.d", f));
  return files.flatMap((file) => {
    if (!existsSync(file)) return [];
    const text = readFileSync(file, "utf8");
    if (file.endsWith(".list")) return oneLineSources(text);
    if (file.endsWith(".sources")) return deb822Sources(text);
    return [];
  });
}

/** `deb [options] URI SUITE COMPONENT…` lines. */
function oneLineSources(text: string): AptSource[] {
  const sources: AptSource[] = [];
  for (const line of text.split("\n")) {
    const words = line
      .replace(/#.*/, "")
      .replace(/\[[^\]]*\]/, "")
      .trim()
      .split(/\s+/);
    const [type = "", uri = "", suite = "", ...components] = words;
    if (type === "deb") sources.push({ types: [type], uris: [uri], suites: [suite], components });
  }
  return sources;
}

/** Stanzas of `Field: values` lines, separated by blank lines; `Enabled: no` ones skipped. */
function deb822Sources(text: string): AptSource[] {
  const sources: AptSource[] = [];
  for (const stanza of text.split(/\n\s*\n/)) {
    const fields: Record<string, string[]> = {};
    for (const line of stanza.split("\n")) {
      const m = /^([\w-]+):\s*(.*)$/.exec(line);
      if (m?.[1]) fields[m[1].toLowerCase()] = (m[2] ?? "").trim().split(/\s+/);
    }
    if (fields.enabled?.[0] === "no") continue;
    sources.push({
      types: fields.types ?? [],
      uris: fields.uris ?? [],
      suites: fields.suites ?? [],
      components: fields.components ?? [],
    });
  }
  return sources;
}

/** apt source lines for SUITE, from the host's mirror (HIVE_DEBIAN_MIRROR overrides). */
export function debianSources(suite: string): string[] {
  const sources = hostAptSources().filter((s) => s.types.includes("deb") && s.components.includes("main"));
  const uriFor = (wanted: string) => sources.find((s) => s.suites.includes(wanted))?.uris[0];
  const main = process.env.HIVE_DEBIAN_MIRROR ?? uriFor(suite);
  const security = process.env.HIVE_DEBIAN_SECURITY_MIRROR ?? uriFor(`${suite}-security`);
  if (!main)
    throw new Error(
      `no apt source for Debian ${suite} main on this host; set HIVE_DEBIAN_MIRROR (and HIVE_DEBIAN_SECURITY_MIRROR)`,
    );
  const lines = [`deb ${main} ${suite} main`, `deb ${main} ${suite}-updates main`];
  if (security) lines.push(`deb ${security} ${suite}-security main`);
  return lines;
}
