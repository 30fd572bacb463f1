/**
 * The words the ring drain (ring-drain.ts) and its consumer (ring-consumer.ts) share: Int32Array
 * and BigInt64Array over SharedArrayBuffers, so that either side sleeps on a word
 * (Atomics.waitAsync) until the other changes it.
 */

/**
 * Control words (Int32Array). `unread`: bytes of the ring the drain has not read yet as of its
 * last look, -1 before its first.
 */
export const CONTROL = { stop: 0, reading: 1, ringUsed: 2, unread: 3, words: 4 } as const;

/**
 * The `reading` word: free, or paused (alerts can wait no more: read nothing). Each batch is
 * handled before the next is read, so a pause comes at most one batch late.
 */
export const READING = { free: 0, paused: 1 } as const;

/**
 * Acknowledgement words (BigInt64Array, one per drain): the ring position and batch handled,
 * and `final` = no more acknowledgements will come.
 */
export const ACK = { pos: 0, seq: 1, final: 2, words: 3 } as const;

/**
 * Resolves once `words[index]` is no longer `value` (or was not), or after `timeoutMs`: a sleep
 * that lets the event loop turn, woken by Atomics.notify on the word.
 */
export function sleepOn(words: Int32Array, index: number, value: number, timeoutMs: number): Promise<unknown>;
export function sleepOn(
  words: BigInt64Array,
  index: number,
  value: bigint,
  timeoutMs: number,
): Promise<unknown>;
export function sleepOn(
  words: Int32Array | BigInt64Array,
  index: number,
  value: number | bigint,
  timeoutMs: number,
): Promise<unknown> {
  const waited =
    words instanceof Int32Array
      ? Atomics.waitAsync(words, index, value as number, timeoutMs)
      : Atomics.waitAsync(words, index, value as bigint, timeoutMs);
  return waited.async ? waited.value : Promise.resolve(waited.value);
}
