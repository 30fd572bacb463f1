/**
 * A memo of a function of strings (callback URLs → their stream or parsed URL). Callback
 * URLs come from policies: few, but a policy author could write many, so the memo forgets
 * everything once it holds more than `maxKeys`.
 */
export function boundedMemo<T>(fn: (key: string) => T, maxKeys = 10_000): (key: string) => T {
  const memo = new Map<string, T>();
  return (key) => {
    if (memo.has(key)) return memo.get(key) as T;
    const value = fn(key);
    if (memo.size > maxKeys) memo.clear();
    memo.set(key, value);
    return value;
  };
}
