/**
 * String formats used by the schemas, registered with TypeBox once. Each has a twin in
 * the CRD (an OpenAPI `format` the API server knows, or a CEL rule) so that admission and
 * `hive validate` agree.
 */
import { FormatRegistry } from "@sinclair/typebox";
import { containerNameMatcher } from "./container-name.ts";

/** What the agent can run: RE2 syntax, bounded size (the CRD's twin is a CEL rule on container-name). */
function isRegex(value: string): boolean {
  return containerNameMatcher(value).ok;
}

function isIPv4(value: string): boolean {
  const parts = value.split(".");
  return parts.length === 4 && parts.every((p) => /^(0|[1-9][0-9]{0,2})$/.test(p) && Number(p) <= 255);
}

function isHttpUrl(value: string): boolean {
  if (!URL.canParse(value)) return false;
  const { protocol, hostname } = new URL(value);
  return (protocol === "http:" || protocol === "https:") && hostname.length > 0;
}

function isDateTime(value: string): boolean {
  return (
    /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(value) &&
    !Number.isNaN(Date.parse(value))
  );
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const FORMATS: Record<string, (value: string) => boolean> = {
  regex: isRegex,
  ipv4: isIPv4,
  "http-url": isHttpUrl,
  "date-time": isDateTime,
  uuid: (value) => UUID.test(value),
};

for (const [name, check] of Object.entries(FORMATS)) {
  if (!FormatRegistry.Has(name)) FormatRegistry.Set(name, check);
}
