/**
 * Field `n` (1-based, as in proc(5)) of /proc/<pid>/stat, for n ≥ 3. "pid (comm) state ppid ...":
 * comm is the process's own choice and may hold ") ", spaces and newlines, so the fields after
 * it are found from the LAST ")".
 */
export function parseStatField(stat: string, n: number): string | undefined {
  const close = stat.lastIndexOf(")");
  if (close < 0 || n < 3) return undefined;
  const fields = stat
    .slice(close + 1)
    .trim()
    .split(" ");
  if (fields[0] === undefined || !/^[A-Za-z]$/.test(fields[0])) return undefined;
  return fields[n - 3];
}
