/**
 * Ordering text by UTF-16 code units: the same order on every node and in every locale, and no
 * ICU collator loaded for it (`localeCompare` maps a few MiB of the node binary's collation
 * data into the agent to sort status lists).
 */
export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
