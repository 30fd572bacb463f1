import { describe, expect, it } from "vitest";
import { kubeConfigSource } from "./agent-base.ts";

describe("how the agent reaches the API server", () => {
  it("prefers a URL (with its token), then a kubeconfig file, else in-cluster", () => {
    expect(kubeConfigSource({ server: "https://api:6443", token: "t", kubeconfig: "/k" })).toEqual({
      url: "https://api:6443",
      token: "t",
    });
    expect(kubeConfigSource({ server: "https://api:6443" })).toEqual({ url: "https://api:6443" });
    expect(kubeConfigSource({ kubeconfig: "/k" })).toEqual({ kubeconfigPath: "/k" });
    expect(kubeConfigSource({})).toEqual({});
  });
});
