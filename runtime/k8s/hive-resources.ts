/**
 * Typed reads and writes of Hive's custom resources (HivePolicy, HiveData) through
 * client-node's CustomObjectsApi. Lists are paginated; writes that race are retried on 409
 * Conflict from a fresh read; a missing object on delete is not an error.
 */
import { type CustomObjectsApi, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import type { HiveData } from "../../api/data.ts";
import { GROUP, PLURAL_DATA, PLURAL_POLICY, VERSION } from "../../api/meta.ts";
import type { HivePolicy, HivePolicyStatus } from "../../api/policy.ts";
import { apiError, isAlreadyExists, isConflict, isNotFound } from "./api-errors.ts";

const MERGE_PATCH = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

interface ListResponse<T> {
  items?: T[];
  metadata?: { continue?: string; resourceVersion?: string };
}

export interface HiveResourcesOptions {
  /** Items per LIST page; default 500. */
  pageSize?: number;
  /** Attempts for a write that meets 409 Conflict; default 5. */
  conflictRetries?: number;
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

export class HiveResources {
  private readonly custom: CustomObjectsApi;
  private readonly pageSize: number;
  private readonly retries: number;

  constructor(custom: CustomObjectsApi, options: HiveResourcesOptions = {}) {
    this.custom = custom;
    this.pageSize = options.pageSize ?? 500;
    this.retries = options.conflictRetries ?? 5;
  }

  private async listAll<T>(
    plural: string,
    namespace: string | undefined,
    labelSelector?: string,
  ): Promise<T[]> {
    const items: T[] = [];
    let token: string | undefined;
    do {
      const q = {
        group: GROUP,
        version: VERSION,
        plural,
        limit: this.pageSize,
        ...(token ? { _continue: token } : {}),
        ...(labelSelector ? { labelSelector } : {}),
      };
      let page: ListResponse<T>;
      try {
        page = (
          namespace
            ? await this.custom.listNamespacedCustomObject({ ...q, namespace })
            : await this.custom.listClusterCustomObject(q)
        ) as ListResponse<T>;
      } catch (err) {
        throw apiError(`list ${plural}`, namespace ?? "all namespaces", err);
      }
      items.push(...(page.items ?? []));
      token = page.metadata?.continue || undefined;
    } while (token);
    return items;
  }

  private async getOne<T>(plural: string, namespace: string, name: string): Promise<T | undefined> {
    try {
      return (await this.custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural,
        namespace,
        name,
      })) as T;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw apiError(`get ${plural}`, `${namespace}/${name}`, err);
    }
  }

  // ---- HivePolicy -------------------------------------------------------------------------

  listPolicies(namespace?: string): Promise<HivePolicy[]> {
    return this.listAll<HivePolicy>(PLURAL_POLICY, namespace);
  }

  getPolicy(namespace: string, name: string): Promise<HivePolicy | undefined> {
    return this.getOne<HivePolicy>(PLURAL_POLICY, namespace, name);
  }

  /** Writes status through the status subresource (merge patch: only `status` changes). */
  async patchPolicyStatus(
    namespace: string,
    name: string,
    status: HivePolicyStatus,
  ): Promise<HivePolicy | undefined> {
    try {
      return (await this.custom.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: VERSION, plural: PLURAL_POLICY, namespace, name, body: { status } },
        MERGE_PATCH,
      )) as HivePolicy;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw apiError("patch hivepolicy status", `${namespace}/${name}`, err);
    }
  }

  /**
   * Adds (or removes) a finalizer, guarded by the resourceVersion read, retried on conflict.
   * Returns the updated policy, or undefined when it no longer exists.
   */
  async setPolicyFinalizer(
    namespace: string,
    name: string,
    finalizer: string,
    present: boolean,
  ): Promise<HivePolicy | undefined> {
    for (let attempt = 1; ; attempt++) {
      const policy = await this.getPolicy(namespace, name);
      if (!policy) return undefined;
      const current = policy.metadata.finalizers ?? [];
      if (current.includes(finalizer) === present) return policy;
      const finalizers = present ? [...current, finalizer] : current.filter((f) => f !== finalizer);
      try {
        return (await this.custom.patchNamespacedCustomObject(
          {
            group: GROUP,
            version: VERSION,
            plural: PLURAL_POLICY,
            namespace,
            name,
            body: { metadata: { finalizers, resourceVersion: policy.metadata.resourceVersion } },
          },
          MERGE_PATCH,
        )) as HivePolicy;
      } catch (err) {
        if (isNotFound(err)) return undefined;
        if (isConflict(err) && attempt < this.retries) continue;
        throw apiError(`${present ? "add" : "remove"} finalizer ${finalizer}`, `${namespace}/${name}`, err);
      }
    }
  }

  // ---- HiveData ---------------------------------------------------------------------------

  listData(namespace?: string, labelSelector?: string): Promise<HiveData[]> {
    return this.listAll<HiveData>(PLURAL_DATA, namespace, labelSelector);
  }

  getData(namespace: string, name: string): Promise<HiveData | undefined> {
    return this.getOne<HiveData>(PLURAL_DATA, namespace, name);
  }

  /**
   * Creates the HiveData, or brings an existing one with the same name to this content
   * (spec, labels, annotations, ownerReferences). Idempotent: an identical object is not
   * written again. `changed` tells whether a write happened.
   */
  async applyData(data: HiveData): Promise<{ data: HiveData; changed: boolean }> {
    const namespace = data.metadata.namespace;
    const name = data.metadata.name;
    if (!namespace || !name) throw new Error("applyData needs metadata.namespace and metadata.name");
    try {
      const created = (await this.custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural: PLURAL_DATA,
        namespace,
        body: data,
      })) as HiveData;
      return { data: created, changed: true };
    } catch (err) {
      if (!isAlreadyExists(err)) throw apiError("create hivedata", `${namespace}/${name}`, err);
    }
    for (let attempt = 1; ; attempt++) {
      const existing = await this.getData(namespace, name);
      if (!existing) return this.applyData(data); // deleted in between: create again
      const m = existing.metadata;
      if (
        same(existing.spec, data.spec) &&
        same(m.labels, data.metadata.labels) &&
        same(m.annotations, data.metadata.annotations) &&
        same(m.ownerReferences, data.metadata.ownerReferences)
      ) {
        return { data: existing, changed: false };
      }
      const body: HiveData = {
        ...existing,
        spec: data.spec,
        metadata: {
          ...m,
          labels: data.metadata.labels,
          annotations: data.metadata.annotations,
          ownerReferences: data.metadata.ownerReferences,
        },
      };
      try {
        const replaced = (await this.custom.replaceNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          plural: PLURAL_DATA,
          namespace,
          name,
          body,
        })) as HiveData;
        return { data: replaced, changed: true };
      } catch (err) {
        if ((isConflict(err) || isNotFound(err)) && attempt < this.retries) continue;
        throw apiError("replace hivedata", `${namespace}/${name}`, err);
      }
    }
  }

  /** Deletes one HiveData; returns false when it did not exist. */
  async deleteData(namespace: string, name: string): Promise<boolean> {
    try {
      await this.custom.deleteNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural: PLURAL_DATA,
        namespace,
        name,
      });
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw apiError("delete hivedata", `${namespace}/${name}`, err);
    }
  }

  /** Deletes every HiveData in a namespace that matches a label selector, in one request. */
  async deleteDataMatching(namespace: string, labelSelector: string): Promise<void> {
    try {
      await this.custom.deleteCollectionNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural: PLURAL_DATA,
        namespace,
        labelSelector,
      });
    } catch (err) {
      throw apiError("delete hivedata collection", `${namespace} (${labelSelector})`, err);
    }
  }
}
