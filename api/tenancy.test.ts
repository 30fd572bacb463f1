/**
 * Where a tenant's alerts may go, as the agent decides it before any request: a callback is
 * compared with the monitor's prefixes in the form the HTTP client sends, so a URL that reads
 * as lying under a prefix but leaves it once normalised (dot segments, encoded slashes, a
 * backslash, userinfo) is refused.
 */
import { describe, expect, it } from "vitest";
import { callbackPrefixProblem, tenantCallbackAllowed } from "./tenancy.ts";

const PREFIXES = ["https://allowed.example/teams/a/", "https://teams.example", "https://hooks.example/t"];

describe("tenant callbacks", () => {
  it("allows a URL under a prefix, compared by path segments", () => {
    for (const url of [
      "https://allowed.example/teams/a/alerts",
      "https://allowed.example/teams/a/alerts?token=x1",
      "https://teams.example/",
      "https://teams.example",
      "https://teams.example/team-a/hook",
      "https://hooks.example/t",
      "https://hooks.example/t/a",
      "https://hooks.example/t?k=v",
    ])
      expect(tenantCallbackAllowed(url, PREFIXES), url).toBe(true);
  });

  it("refuses a URL that leaves the prefix once normalised, or names userinfo", () => {
    for (const url of [
      "https://allowed.example/teams/a/%2e%2e/%2e%2e/admin",
      "https://allowed.example/teams/a/%2E%2E/%2E%2E/admin",
      "https://allowed.example/teams/a/../../admin",
      "https://allowed.example/teams/a/./x",
      "https://allowed.example/teams/a/..",
      "https://allowed.example/teams/a/..%2fadmin",
      "https://allowed.example/teams/a/..%5Cadmin",
      "https://allowed.example/teams/a/..\\..\\admin",
      "https://user@allowed.example/teams/a/x",
      "https://allowed.example@evil.example/teams/a/x",
      "https://ALLOWED.example/teams/a/x",
      "https://allowed.example:443/teams/a/x",
      "https://allowed.example/teams/a/x y",
      "https://allowed.example/teams/a/x\t",
      "https://allowed.example/teams/a/x?q='",
      "https://teams.example.evil.io/x",
      "https://hooks.example/team",
      "https://hooks.example/t%2fx",
      "http://allowed.example/teams/a/x",
      "not a url",
    ])
      expect(tenantCallbackAllowed(url, PREFIXES), url).toBe(false);
  });

  it("allows nothing without prefixes", () => {
    expect(tenantCallbackAllowed("https://allowed.example/teams/a/x", [])).toBe(false);
  });

  it("takes only prefixes in the form they are compared in", () => {
    expect(callbackPrefixProblem("https://allowed.example/teams/a/")).toBeUndefined();
    expect(callbackPrefixProblem("https://teams.example")).toBeUndefined();
    for (const prefix of [
      "https://Allowed.example/teams/",
      "https://allowed.example/teams/../",
      "https://user@allowed.example/",
      "https://allowed.example/teams/?q=1",
      "https://allowed.example/teams/it's",
      "ftp://allowed.example/",
    ])
      expect(callbackPrefixProblem(prefix), prefix).toBeTypeOf("string");
  });
});
