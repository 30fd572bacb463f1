/**
 * HiveData: one per trap × container × kernel, written by the discover controller and
 * read by the loader. Field names follow the reference design (`inode-no`, `kernel-id`);
 * `device` is Hive's addition so the kernel can tell equal inode numbers on different
 * filesystems apart. A HiveData carries a file's identity only: the callback, allow list and
 * tenancy the loader alerts with are the live HivePolicy's (others may write HiveData).
 */
import { type Static, Type } from "@sinclair/typebox";
import "./formats.ts";
import { AccessKindSchema, API_VERSION, KIND_DATA, ObjectMetaSchema, WorkloadSchema } from "./meta.ts";
import { MAX_ALLOW_ENTRIES, MAX_EXE_LENGTH } from "./policy.ts";

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

/** A non-zero unsigned 64-bit decimal (at most 18446744073709551615; checked by inodeOf). */
export const INODE_PATTERN = "^[1-9][0-9]{0,19}$";
const INODE_MAX = (1n << 64n) - 1n;

/** The exact inode number of a HiveData; undefined when it does not fit 64 bits. */
export function inodeOf(spec: { "inode-no": number | string }): bigint | undefined {
  const value = BigInt(spec["inode-no"]);
  return value >= 1n && value <= INODE_MAX ? value : undefined;
}

/** At most this many executables per HiveData: two per allow entry (`exe`, `parent-exe`). */
export const MAX_DATA_EXECUTABLES = 2 * MAX_ALLOW_ENTRIES;

/** An executable an allow entry names, as discover found it in the container (a file identity). */
export const ExecutableSchema = Type.Object(
  {
    path: Type.String({ maxLength: MAX_EXE_LENGTH, description: "The path as the allow entry writes it." }),
    "inode-no": Type.String({ pattern: INODE_PATTERN, description: "Inode number (decimal, 64 bits)." }),
    device: DeviceSchema,
  },
  { additionalProperties: false },
);
export type Executable = Static<typeof ExecutableSchema>;

/** The most pod labels a HiveData (and so an alert) carries: the first ones by name. */
export const MAX_POD_LABELS = 64;

/**
 * What an alert says about the pod besides its name: labels, owning workload, the container's
 * image. The node that found the container writes it (the loader of a kernel shared by several
 * nodes never saw that pod). Shown in alerts, never used for a decision.
 */
export const PodFactsSchema = Type.Object(
  {
    labels: Type.Optional(
      Type.Record(Type.String({ maxLength: 317 }), Type.String({ maxLength: 63 }), {
        maxProperties: MAX_POD_LABELS,
        description: `The pod's labels (the first ${MAX_POD_LABELS} by name).`,
      }),
    ),
    workload: Type.Optional(WorkloadSchema),
    image: Type.Optional(
      Type.String({ maxLength: 4096, description: "The container's image, as the pod spec names it." }),
    ),
  },
  {
    additionalProperties: false,
    description: "The pod and container the trapped file was found in, for alerts.",
  },
);
export type PodFacts = Static<typeof PodFactsSchema>;

export const HiveDataSpecSchema = Type.Object(
  {
    // 64 bits exactly: overlayfs (xino) and others put bits above 2^53 into inode numbers, which a
    // JSON number would round and the kernel key would then never match.
    "inode-no": Type.Union([Type.Integer({ minimum: 1 }), Type.String({ pattern: INODE_PATTERN })], {
      "x-kubernetes-int-or-string": true,
      "x-kubernetes-validations": [
        {
          rule: `string(self).matches('${INODE_PATTERN}')`,
          message: "inode-no must be a decimal inode number",
        },
      ],
      description:
        "Inode number of the trapped file: a decimal string, exact for all 64 bits (integers written by earlier versions are read too).",
    }),
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
    executables: Type.Optional(
      Type.Array(ExecutableSchema, {
        maxItems: MAX_DATA_EXECUTABLES,
        description:
          "The files at the exact paths the trap's allow entries name (`exe`, `parent-exe`), as found in the same container: an entry holds only for the process that runs one of them.",
      }),
    ),
    pod: Type.Optional(PodFactsSchema),
    "image-file": Type.Optional(
      Type.Object(
        {
          "inode-no": Type.String({
            pattern: INODE_PATTERN,
            description: "Inode number (decimal, 64 bits).",
          }),
          device: DeviceSchema,
        },
        {
          additionalProperties: false,
          description:
            "The image layer's file beneath the container's (unchanged since the image): one access checks both, and the kernel folds the two checks into one event.",
        },
      ),
    ),
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
