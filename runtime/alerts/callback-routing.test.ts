import { describe, expect, it } from "vitest";
import { routeCallback } from "./callback-routing.ts";

const tenancy = { platformNamespace: "hive-system", callbacks: ["https://siem.example.com/tenants/"] };
const monitor = "https://siem.example.com/hive";

describe("callback routing", () => {
  it("uses the trap's own callback without tenancy, or for the platform's policies", () => {
    const own = { callback: "http://10.0.0.9/ops", policyNamespace: "team-a" };
    expect(routeCallback(own, monitor, undefined)).toEqual({ callback: own.callback });
    expect(routeCallback({ ...own, policyNamespace: "hive-system" }, monitor, tenancy)).toEqual({
      callback: own.callback,
    });
  });

  it("falls back to the monitor's callback for a trap without its own", () => {
    expect(routeCallback({ policyNamespace: "team-a" }, monitor, tenancy)).toEqual({ callback: monitor });
    expect(routeCallback({ callback: "" }, undefined, undefined)).toEqual({ callback: undefined });
  });

  it("lets a tenant use an allowed prefix, and sets any other URL aside for the monitor's", () => {
    const allowed = { callback: "https://siem.example.com/tenants/team-a", policyNamespace: "team-a" };
    expect(routeCallback(allowed, monitor, tenancy)).toEqual({ callback: allowed.callback });
    expect(routeCallback({ callback: "http://10.0.0.9/steal" }, monitor, tenancy)).toEqual({
      callback: monitor,
      refused: { namespace: "default", url: "http://10.0.0.9/steal" },
    });
  });
});
