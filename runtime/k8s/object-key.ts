/** `namespace/name`: the informer cache's key, and the controllers' key for the same objects. */
export function objectKey(obj: { metadata?: { namespace?: string; name?: string } }): string {
  return `${obj.metadata?.namespace ?? ""}/${obj.metadata?.name ?? ""}`;
}
