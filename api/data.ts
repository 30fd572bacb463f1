/**
 * HiveData: one per trap × container × kernel, written by the discover controller and
 * read by the loader. Field names follow the reference design (`inode-no`, `kernel-id`);
 * `device` is Hive's addition so the kernel can tell equal inode numbers on different
 * filesystems apart.
 */
import { type Static, Type } from "@sinclair/typebox";
import "./formats.ts";
import { AccessKindSchema, API_VERSION, KIND_DATA, ObjectMetaSchema } from "./meta.ts";

export const DeviceSchema = Type.Object(
  {
    major: Type.Integer({
      minimum: 0,
      maximum: 4095,
      description: "Major device number (12 bits in the kernel).",
    }),
    minor: Type.Integer({
      minimum: 0,
      maximum: 1048575,
      description: "Minor device number (20 bits in the kernel).",
    }),
  },
  {
    additionalProperties: false,
    description: "The device of the file's filesystem as the kernel sees it (the superblock's s_dev).",
  },
);
export type Device = Static<typeof DeviceSchema>;

export const HiveDataSpecSchema = Type.Object(
  {
    "inode-no": Type.Integer({ minimum: 1, description: "Inode number of the trapped file." }),
    "kernel-id": Type.String({
      format: "uuid",
      description: "boot_id of the kernel the inode lives in; only that kernel's loader watches it.",
    }),
    device: DeviceSchema,
    accesses: Type.Array(AccessKindSchema, {
      minItems: 1,
      uniqueItems: true,
      description: "Access kinds the trap reports.",
      "x-kubernetes-list-type": "set",
    }),
  },
  { additionalProperties: false },
);
export type HiveDataSpec = Static<typeof HiveDataSpecSchema>;

export const HiveDataSchema = Type.Object(
  {
    apiVersion: Type.Literal(API_VERSION),
    kind: Type.Literal(KIND_DATA),
    metadata: ObjectMetaSchema,
    spec: HiveDataSpecSchema,
  },
  { description: "A trapped file found in one container: what the kernel program watches." },
);
export type HiveData = Static<typeof HiveDataSchema>;
