/**
 * Kubernetes `Status` error bodies, shaped exactly as kube-apiserver returns them
 * (k8s.io/apimachinery/pkg/api/errors): kind Status, status Failure, a reason, the HTTP
 * code, and details naming the object and its resource.
 */

export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}

export interface StatusBody {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, unknown>;
  status: "Failure" | "Success";
  message?: string;
  reason?: string;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    uid?: string;
    causes?: StatusCause[];
    retryAfterSeconds?: number;
  };
  code: number;
}

/** The `<resource>.<group>` spelling Kubernetes uses in messages ("pods", "leases.coordination.k8s.io"). */
export interface ResourceName {
  group: string;
  plural: string;
}

function qualified(r: ResourceName): string {
  return r.group === "" ? r.plural : `${r.plural}.${r.group}`;
}

/** An API error carried as a value until the HTTP layer writes it. */
export class ApiError extends Error {
  readonly status: StatusBody;
  constructor(status: StatusBody) {
    super(status.message ?? status.reason ?? "error");
    this.name = "ApiError";
    this.status = status;
  }
}

function failure(code: number, reason: string, message: string, details?: StatusBody["details"]): ApiError {
  const body: StatusBody = {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    code,
  };
  if (details) body.details = details;
  return new ApiError(body);
}

function details(r: ResourceName, name: string): StatusBody["details"] {
  const d: NonNullable<StatusBody["details"]> = { name, kind: r.plural };
  if (r.group !== "") d.group = r.group;
  return d;
}

export const errors = {
  notFound(r: ResourceName, name: string): ApiError {
    return failure(404, "NotFound", `${qualified(r)} "${name}" not found`, details(r, name));
  },
  alreadyExists(r: ResourceName, name: string): ApiError {
    return failure(409, "AlreadyExists", `${qualified(r)} "${name}" already exists`, details(r, name));
  },
  conflict(
    r: ResourceName,
    name: string,
    why = "the object has been modified; please apply your changes to the latest version and try again",
  ): ApiError {
    return failure(
      409,
      "Conflict",
      `Operation cannot be fulfilled on ${qualified(r)} "${name}": ${why}`,
      details(r, name),
    );
  },
  invalid(kind: string, group: string, name: string, causes: StatusCause[]): ApiError {
    const list = causes.map((c) => `${c.field ?? ""}: ${c.message ?? ""}`).join(", ");
    const d: NonNullable<StatusBody["details"]> = { name, kind, causes };
    if (group !== "") d.group = group;
    const label = group === "" ? kind : `${kind}.${group}`;
    return failure(422, "Invalid", `${label} "${name}" is invalid: ${list}`, d);
  },
  badRequest(message: string): ApiError {
    return failure(400, "BadRequest", message);
  },
  forbidden(r: ResourceName, name: string, why: string): ApiError {
    return failure(403, "Forbidden", `${qualified(r)} "${name}" is forbidden: ${why}`, details(r, name));
  },
  methodNotAllowed(message: string): ApiError {
    return failure(405, "MethodNotAllowed", message);
  },
  unsupportedMediaType(type: string): ApiError {
    return failure(
      415,
      "UnsupportedMediaType",
      `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got ${type})`,
    );
  },
  /** 410 Expired: a watch or list asked for a resourceVersion older than the retained history. */
  expired(message: string): ApiError {
    return failure(410, "Expired", message);
  },
  /** A list asked for a resourceVersion the server has not reached (504, cause ResourceVersionTooLarge). */
  tooLargeResourceVersion(asked: string, current: number): ApiError {
    return failure(504, "Timeout", `Too large resource version: ${asked}, current: ${current}`, {
      causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
      retryAfterSeconds: 1,
    });
  },
  /** A ValidatingAdmissionPolicy's denial: its validation's reason (default Invalid, 422). */
  admissionDenied(reason: string, message: string, r: ResourceName, name: string): ApiError {
    const codes: Record<string, number> = {
      Unauthorized: 401,
      Forbidden: 403,
      Invalid: 422,
      RequestEntityTooLarge: 413,
    };
    return failure(codes[reason] ?? 422, codes[reason] ? reason : "Invalid", message, details(r, name));
  },
  unauthorized(): ApiError {
    return failure(401, "Unauthorized", "Unauthorized");
  },
  notFoundPath(path: string): ApiError {
    return failure(404, "NotFound", `the server could not find the requested resource (${path})`, {});
  },
};
