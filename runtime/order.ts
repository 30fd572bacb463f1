/**
 * Ordering text by UTF-16 code units: the same order on every node and in every locale, and no
 * ICU collator loaded to sort status lists (`localeCompare` loads one).
 */
export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
