/** The `match` of a HivePolicy trap: which pods and containers the trap applies to. */
import { type Static, Type } from "@sinclair/typebox";
import "./formats.ts";
import {
  DNS_LABEL_PATTERN,
  DNS_SUBDOMAIN_PATTERN,
  LABEL_KEY_PATTERN,
  LABEL_VALUE_PATTERN,
} from "./kube-name-patterns.ts";

export const TrapMatchSchema = Type.Object(
  {
    pod: Type.Optional(
      Type.String({
        pattern: DNS_SUBDOMAIN_PATTERN,
        description: "Name of the pod.",
        errorMessage: "must be a pod name (a DNS subdomain)",
      }),
    ),
    namespace: Type.Optional(
      Type.String({
        pattern: DNS_LABEL_PATTERN,
        description: "Namespace of the pod.",
        errorMessage: "must be a namespace name (a DNS label)",
      }),
    ),
    ip: Type.Optional(
      Type.String({
        format: "ipv4",
        description: "IPv4 address of the pod.",
        errorMessage: "must be an IPv4 address such as 10.0.0.7",
      }),
    ),
    "container-name": Type.Optional(
      Type.String({
        format: "regex",
        minLength: 1,
        maxLength: 1024,
        description:
          "Regular expression (RE2 syntax: no backreferences or lookaround) the container name must match (anchored at both ends).",
        errorMessage:
          "must be a regular expression RE2 accepts (no backreferences or lookaround) of bounded size",
        "x-kubernetes-validations": [
          {
            // CEL's matches() compiles its pattern with RE2 and fails on one RE2 refuses, which
            // refuses the object; the rule holds for every pattern that compiles.
            rule: "type(''.matches(self)) == bool",
            message:
              "container-name must be a regular expression RE2 accepts (no backreferences or lookaround)",
          },
        ],
      }),
    ),
    matchLabels: Type.Optional(
      Type.Record(
        Type.String({ pattern: LABEL_KEY_PATTERN }),
        Type.String({ pattern: LABEL_VALUE_PATTERN, maxLength: 63 }),
        {
          description: "Labels the pod must carry, all of them, with these values.",
          errorMessage: "must map label names to label values",
        },
      ),
    ),
  },
  {
    additionalProperties: false,
    description: "Which pods and containers the trap applies to; no filter matches every pod.",
  },
);
export type TrapMatch = Static<typeof TrapMatchSchema>;
