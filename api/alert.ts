/**
 * The alert: what a Hive user receives, on stdout and at the callback. The reference
 * example's fields (snake_case, `container` spelled correctly) plus what responders need.
 * `schemas/alert.schema.json` is generated from this definition (npm run gen).
 */
import { type Static, Type } from "@sinclair/typebox";
import "./formats.ts";
import { AccessKindSchema, WorkloadSchema } from "./meta.ts";
import { SEVERITIES } from "./policy.ts";

export const ALERT_SCHEMA_ID = "https://hive-operator.com/schemas/alert.schema.json";

/**
 * Bodies a callback can receive an alert in (runtime/alerts/delivery/ builds each): `json` the
 * alert itself, `cloudevents` a CloudEvents 1.0 structured event, `alertmanager` Alertmanager's
 * v2 API (`POST /api/v2/alerts`), `slack` a Slack-compatible incoming-webhook message.
 */
export const CALLBACK_FORMATS = ["json", "cloudevents", "alertmanager", "slack"] as const;
export type CallbackFormat = (typeof CALLBACK_FORMATS)[number];

/**
 * Changes of a trapped file an alert can name (`metadata.change`): its name unlinked, renamed
 * away, another file renamed over it, or its size set.
 */
export const FILE_CHANGES = ["deleted", "renamed", "replaced", "truncated"] as const;
export type FileChange = (typeof FILE_CHANGES)[number];

/** How far up `process.ancestors` goes beyond the parent. */
export const MAX_ANCESTORS = 8;

/** Where an executable path came from; `unknown` says so explicitly and is never allowlisted. */
export const EXE_SOURCES = ["exec", "seed", "unknown"] as const;
export type ExeSource = (typeof EXE_SOURCES)[number];

/** The executable of a process, as the kernel resolved it (never read from /proc afterwards). */
const ExecIdentityFields = {
  exe: Type.Optional(
    Type.String({
      description:
        "The executable as the kernel resolved it (through symlinks and relative paths), seen from the process's own root: a container process shows the path inside its container.",
    }),
  ),
  exe_source: Type.Union(
    EXE_SOURCES.map((s) => Type.Literal(s)),
    {
      description:
        "`exec`: recorded by the kernel when the process executed it; `seed`: the process predates the kernel program and was read from the kernel when it loaded; `unknown`: the kernel did not know the process (then `exe` is absent).",
    },
  ),
  exe_truncated: Type.Optional(
    Type.Boolean({
      description:
        "The path was longer than the kernel keeps: `exe` holds its end, and no allowlist matches it.",
    }),
  ),
};

/** Where an executable's file lives (see `exe_file.layer`). */
export const EXE_LAYERS = ["image", "container", "unlinked", "other"] as const;

/** Which file a process ran and what may run in it besides, as the kernel recorded at its exec. */
const ExecProvenanceFields = {
  exe_file: Type.Optional(
    Type.Object(
      {
        layer: Type.Union(
          EXE_LAYERS.map((l) => Type.Literal(l)),
          {
            description:
              "`image`: a file of the container image's layers, unchanged; `container`: written or changed in the container since it started (an overlay's upper layer); `unlinked`: a memfd or a file deleted since; `other`: another filesystem (a volume, the host).",
          },
        ),
        device: Type.String({
          pattern: "^[0-9]+:[0-9]+$",
          description: "major:minor of the file's filesystem.",
        }),
        inode: Type.String({ pattern: "^[0-9]+$", description: "The file's inode number (decimal)." }),
      },
      { additionalProperties: false, description: "The executable's file, as the kernel checks it." },
    ),
  ),
  exe_loader_env: Type.Optional(
    Type.Array(Type.String(), {
      description:
        "Dynamic-loader variables (LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH) set when the process executed `exe`: code other than the executable's may run in it.",
    }),
  ),
  exe_env_unread: Type.Optional(
    Type.Boolean({ description: "The environment at exec could not be read whole: nothing is known of it." }),
  ),
  traced: Type.Optional(
    Type.Boolean({
      description:
        "Traced (ptrace), or its memory opened to another process (process_vm_writev, /proc/PID/mem), at its exec or since.",
    }),
  ),
  chroot: Type.Optional(
    Type.Boolean({
      description: "The process's root is a directory inside a mount (chroot), not its container's root.",
    }),
  ),
};

/** Why an allow entry did not hold for this access (closed set; see docs/policies.md, "Expected accessors"). */
export const ALLOW_MISS_REASONS = [
  "other-executable",
  "unknown-process",
  "seeded",
  "path-truncated",
  "written-in-container",
  "unlinked",
  "not-from-image",
  "not-the-image-file",
  "not-resolved",
  "loader-env",
  "env-unread",
  "traced",
  "chroot",
  "other-root",
  "fork-unseen",
  "parent-execed",
  "reparented",
  "accesses",
] as const;
export type AllowMissReason = (typeof ALLOW_MISS_REASONS)[number];

/** Alert.deny_reason: why a denying trap's access was, or was not, refused. */
export const DENY_REASONS = ["denied", "dry-run", "not-armed"] as const;
export type DenyReason = (typeof DENY_REASONS)[number];

export const AlertSchema = Type.Object(
  {
    id: Type.String({
      format: "uuid",
      description: "Unique id of this alert; also sent as the Hive-Alert-Id header.",
    }),
    timestamp: Type.String({ format: "date-time", description: "When the access happened (RFC 3339, UTC)." }),
    hive_policy_name: Type.String({ description: "Name of the HivePolicy whose trap fired." }),
    hive_policy_namespace: Type.Optional(Type.String({ description: "Namespace of that HivePolicy." })),
    trap_id: Type.String({ description: "Stable id of the trap (the `trap-id` label)." }),
    severity: Type.Union(
      SEVERITIES.map((s) => Type.Literal(s)),
      { description: "The trap's severity (default warning)." },
    ),
    labels: Type.Optional(
      Type.Record(Type.String(), Type.String(), {
        description: "The trap's labels (e.g. team), for receivers to route and group on.",
      }),
    ),
    cluster: Type.Optional(
      Type.Object(
        { name: Type.String({ description: "The monitor's clusterName." }) },
        { additionalProperties: false, description: "The cluster, when the monitor names it." },
      ),
    ),
    metadata: Type.Object(
      {
        path: Type.String({ description: "The trapped path, as written in the policy." }),
        inode: Type.Union([Type.Integer({ minimum: 1 }), Type.String({ pattern: "^[1-9][0-9]*$" })], {
          description:
            "Inode number: an integer as in the reference format, or a decimal string when it exceeds 2^53 (overlayfs xino), so that it is always exact.",
        }),
        device: Type.String({
          pattern: "^[0-9]+:[0-9]+$",
          description: "major:minor of the file's filesystem.",
        }),
        mask: Type.Integer({
          minimum: 0,
          description: "Union of the kernel MAY_* masks seen in this access burst.",
        }),
        accesses: Type.Array(AccessKindSchema, { description: "The mask decoded into access kinds." }),
        change: Type.Optional(
          Type.Union(
            FILE_CHANGES.map((c) => Type.Literal(c)),
            {
              description:
                "The file was changed, not only accessed: `deleted` (its name unlinked), `renamed` (renamed away), `replaced` (another file renamed over it: `inode` is the replaced file's), `truncated` (its size set by truncate, ftruncate or an open with O_TRUNC). Reported whatever the trap's `accesses` say, unless the trap sets `changes: false`.",
            },
          ),
        ),
        count: Type.Integer({
          minimum: 1,
          description: "inode_permission checks collapsed into this one access.",
        }),
        kernel_id: Type.String({ description: "boot_id of the kernel where the access happened." }),
      },
      { additionalProperties: false },
    ),
    pod: Type.Optional(
      Type.Object(
        {
          name: Type.String(),
          namespace: Type.String(),
          container: Type.Object(
            {
              id: Type.String(),
              name: Type.String(),
              image: Type.Optional(
                Type.String({ description: "The container's image, as the pod spec names it." }),
              ),
            },
            { additionalProperties: false },
          ),
          labels: Type.Optional(
            Type.Record(Type.String(), Type.String(), {
              description: "The pod's labels when the agent found the file (at most 64, the first by name).",
            }),
          ),
          workload: Type.Optional(WorkloadSchema),
        },
        { additionalProperties: false, description: "Absent for host paths watched in standalone mode." },
      ),
    ),
    node: Type.Object({ name: Type.String() }, { additionalProperties: false }),
    process: Type.Object(
      {
        pid: Type.Integer({ minimum: 0, description: "Thread id (kernel pid) that accessed the file." }),
        tgid: Type.Integer({ minimum: 0, description: "Process id (kernel tgid)." }),
        ppid: Type.Optional(
          Type.Integer({
            minimum: 0,
            description: "Parent process id (tgid), as the kernel saw it at the access.",
          }),
        ),
        ns_pid: Type.Optional(
          Type.Integer({
            minimum: 0,
            description: "The process id inside its own pid namespace (what `ps` shows in the container).",
          }),
        ),
        uid: Type.Integer({ minimum: 0 }),
        gid: Type.Integer({ minimum: 0 }),
        comm: Type.String({
          description:
            "The thread's command name (at most 15 characters). Any process can set it: shown, never used for a decision.",
        }),
        ...ExecIdentityFields,
        ...ExecProvenanceFields,
        exec_time: Type.Optional(
          Type.String({
            format: "date-time",
            description:
              "When the process executed `exe` (for `exe_source: seed`, when the process started).",
          }),
        ),
        parent: Type.Optional(
          Type.Object(
            {
              pid: Type.Integer({ minimum: 0 }),
              comm: Type.Optional(Type.String()),
              ...ExecIdentityFields,
              ...ExecProvenanceFields,
              exec_since_fork: Type.Optional(
                Type.Boolean({
                  description: "The parent ran another executable since it forked the process.",
                }),
              ),
              reparented: Type.Optional(
                Type.Boolean({
                  description: "The parent is not the process that forked it: it was orphaned and adopted.",
                }),
              ),
            },
            { additionalProperties: false, description: "The parent process at the access." },
          ),
        ),
        ancestors: Type.Optional(
          Type.Array(
            Type.Object(
              { pid: Type.Integer({ minimum: 0 }), ...ExecIdentityFields },
              { additionalProperties: false },
            ),
            {
              maxItems: MAX_ANCESTORS,
              description: `The parent's ancestors, nearest first, up to the container's first process or the host's init (at most ${MAX_ANCESTORS}).`,
            },
          ),
        ),
        cgroup_id: Type.Optional(Type.Integer({ minimum: 0 })),
      },
      { additionalProperties: false },
    ),
    allow_misses: Type.Optional(
      Type.Array(
        Type.Object(
          {
            entry: Type.Integer({
              minimum: 0,
              description: "Index of the entry in the trap's `allow` list.",
            }),
            field: Type.Union([Type.Literal("exe"), Type.Literal("parent-exe"), Type.Literal("accesses")]),
            reason: Type.Union(ALLOW_MISS_REASONS.map((r) => Type.Literal(r))),
          },
          { additionalProperties: false },
        ),
        { description: "Why each entry of the trap's allow list did not hold: its first unmet condition." },
      ),
    ),
    denied: Type.Optional(
      Type.Boolean({
        description:
          "Only for a trap with action: deny: true when the kernel refused the access (the process got EACCES).",
      }),
    ),
    deny_reason: Type.Optional(
      Type.Union(
        DENY_REASONS.map((r) => Type.Literal(r)),
        {
          description:
            "Only for a trap with action: deny, why the access was or was not refused: `denied` (the trap denies in this container), `dry-run` (the trap's dryRun: it would have been), `not-armed` (the kernel did not deny it: the container's own file was not armed yet, as at a container's first instruction, or the node's kernel cannot deny).",
        },
      ),
    ),
    summarized: Type.Optional(
      Type.Object(
        {
          bursts: Type.Integer({ minimum: 1, description: "Accesses held (one burst of checks each)." }),
          checks: Type.Integer({ minimum: 0, description: "The permission checks those accesses made." }),
        },
        {
          additionalProperties: false,
          description:
            "A flood: accesses to this file by the same executable from the same container that the kernel held since the previous alert of theirs (beyond a few a second), counted here instead of alerted one by one.",
        },
      ),
    ),
    suppressed: Type.Optional(
      Type.Integer({
        minimum: 0,
        description: "Alerts of this trap dropped by rate limiting since the previous one.",
      }),
    ),
  },
  {
    $id: ALERT_SCHEMA_ID,
    title: "Hive alert",
    description: "One access to a trapped file, or one change of it.",
    additionalProperties: false,
  },
);
export type Alert = Static<typeof AlertSchema>;
