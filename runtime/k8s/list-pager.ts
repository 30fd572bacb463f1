/**
 * One complete LIST, in pages (`limit` + `continue`), with client-go's two fallbacks:
 * - a continue token that expired (410) restarts the list without pagination (client-go's pager);
 * - a list from a resourceVersion the server no longer has (410) or has not reached yet (a
 *   lagging server) is repeated as a consistent read from etcd (client-go's reflector).
 */
import type { Logger } from "../log.ts";
import { apiFailure, isGone, isTooLargeResourceVersion } from "./api-errors.ts";
import type { ListFn, ListPage, ListParams } from "./resource-lister.ts";

/** Where the LIST stands: the next page's request is made from this alone. */
export interface ListCursor {
  /** Items per page; undefined: one unpaginated LIST. */
  limit: number | undefined;
  continueToken: string | undefined;
  /** The version asked for (see ListParams.resourceVersion); undefined: a consistent read. */
  fromVersion: string | undefined;
}

export interface PagedList<T> {
  listFn: ListFn<T>;
  /** Items per page; default 500 (client-go's default). */
  pageSize?: number;
  labelSelector?: string;
  fieldSelector?: string;
  /** Applied to each item as its page arrives. */
  transform: (obj: T) => T;
  /** Counted per request. */
  stats: { listPages: number };
  log: Logger;
  /** Called when the version asked for is refused, before the consistent read that follows. */
  onVersionRefused: () => void;
}

/** The request for the cursor's next page. */
export function pageParams(
  cursor: ListCursor,
  selectors: { labelSelector?: string; fieldSelector?: string },
) {
  const params: ListParams = {};
  // The continue token carries the snapshot's version: the API refuses both together.
  if (!cursor.continueToken && cursor.fromVersion !== undefined) params.resourceVersion = cursor.fromVersion;
  if (cursor.limit) params.limit = cursor.limit;
  if (cursor.continueToken) params.continueToken = cursor.continueToken;
  if (selectors.labelSelector) params.labelSelector = selectors.labelSelector;
  if (selectors.fieldSelector) params.fieldSelector = selectors.fieldSelector;
  return params;
}

/**
 * What to do after a page failed with `err`: start over unpaginated, start over from storage,
 * or give up (the caller retries the whole LIST with backoff).
 */
export function listRecovery(err: unknown, cursor: ListCursor): "unpaginated" | "from-storage" | "fail" {
  if (cursor.continueToken && isGone(err)) return "unpaginated";
  if (
    !cursor.continueToken &&
    cursor.fromVersion !== undefined &&
    cursor.fromVersion !== "0" &&
    (isGone(err) || isTooLargeResourceVersion(err))
  )
    return "from-storage";
  return "fail";
}

/** Lists every page from `fromVersion`; resolves with the items and the list's resourceVersion. */
export async function listAll<T>(
  p: PagedList<T>,
  fromVersion: string | undefined,
): Promise<{ items: T[]; resourceVersion: string }> {
  const items: T[] = [];
  const cursor: ListCursor = { limit: p.pageSize ?? 500, continueToken: undefined, fromVersion };
  for (;;) {
    let page: ListPage<T>;
    try {
      const params = pageParams(cursor, p);
      p.stats.listPages++;
      page = await p.listFn(params);
    } catch (err) {
      const recovery = listRecovery(err, cursor);
      if (recovery === "fail") throw err;
      if (recovery === "unpaginated") {
        // The snapshot behind the token is gone: start over with one unpaginated LIST.
        p.log.info("list continuation expired (410); listing without pagination");
        items.length = 0;
        cursor.continueToken = undefined;
        cursor.limit = undefined;
        cursor.fromVersion = undefined;
      } else {
        // The version we saw last is compacted away, or this server lags behind it: read from etcd.
        p.log.info("list from the last resourceVersion refused; listing from storage", {
          resourceVersion: cursor.fromVersion,
          error: apiFailure(err),
        });
        p.onVersionRefused();
        cursor.fromVersion = undefined;
      }
      continue;
    }
    // Page by page: at most one page of whole objects is alive at a time.
    for (const item of page.items) items.push(p.transform(item));
    cursor.continueToken = page.metadata?._continue ?? page.metadata?.continue ?? undefined;
    if (!cursor.continueToken) return { items, resourceVersion: page.metadata?.resourceVersion ?? "" };
  }
}
