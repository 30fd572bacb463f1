/** The status of a HivePolicy: what its traps found, per trap and in total, and its conditions. */
import { type Static, Type } from "@sinclair/typebox";
import { ConditionSchema } from "./meta.ts";

export const TrapErrorSchema = Type.Object({
  node: Type.Optional(Type.String()),
  pod: Type.Optional(Type.String()),
  container: Type.Optional(Type.String()),
  reason: Type.String({
    description: "Machine-readable cause: FileNotFound, InvalidRegex, PathEscapesContainer, …",
  }),
  message: Type.String(),
});
export type TrapError = Static<typeof TrapErrorSchema>;

export const TrapStatusSchema = Type.Object({
  trapId: Type.String({ description: "The trap's stable id (the `trap-id` label of its HiveData)." }),
  path: Type.String(),
  matchedContainers: Type.Integer({ minimum: 0, description: "Containers this trap currently applies to." }),
  inodesFound: Type.Integer({
    minimum: 0,
    description: "Containers in which the file was found and is watched.",
  }),
  errors: Type.Optional(Type.Array(TrapErrorSchema, { maxItems: 32 })),
});
export type TrapStatus = Static<typeof TrapStatusSchema>;

export const HivePolicyStatusSchema = Type.Object({
  observedGeneration: Type.Optional(Type.Integer({ minimum: 0 })),
  trapCount: Type.Optional(Type.Integer({ minimum: 0 })),
  matchedContainers: Type.Optional(Type.Integer({ minimum: 0 })),
  podsUncovered: Type.Optional(
    Type.Integer({
      minimum: 0,
      description:
        "Pods the traps select that run on nodes without a ready Hive agent: nothing watches their files (the NodesCovered condition names them).",
    }),
  ),
  conditions: Type.Optional(
    Type.Array(ConditionSchema, { "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"] }),
  ),
  traps: Type.Optional(Type.Array(TrapStatusSchema)),
});
export type HivePolicyStatus = Static<typeof HivePolicyStatusSchema>;
