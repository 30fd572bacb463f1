/**
 * A trap's `container-name`, a tenant's regular expression, compiled by RE2 (re2js): matching
 * takes time linear in the pattern and the name, never backtracking, so a pattern such as
 * `(a+)+` cannot stall the agent's event loop. `hive validate`, the component and the agent all
 * compile with this one function, so they accept the same patterns; the CRD's CEL rule compiles
 * with RE2 too (CEL's `matches`). RE2 has no backreferences or lookaround.
 */
import { RE2JS } from "re2js";

/**
 * Largest RE2 program a pattern may compile to. Counted repetition multiplies a program
 * (`.{1000}` is a thousand steps, a 1024-character pattern reaches 100 000): compiling and
 * matching cost grows with it, so it is bounded like every other tenant input.
 */
export const MAX_PATTERN_PROGRAM = 1000;

export type ContainerNameMatcher =
  | { ok: true; matches: (name: string) => boolean }
  | { ok: false; message: string };

/** Compiles a container-name pattern; it matches the whole name, as a Kubernetes user would expect. */
export function containerNameMatcher(pattern: string): ContainerNameMatcher {
  // Checked before compiling: compiling an oversized program is itself the work to avoid.
  if (programBound(pattern) > MAX_PATTERN_PROGRAM) return tooLarge();
  let re: RE2JS;
  try {
    re = RE2JS.compile(pattern);
  } catch (error) {
    const message = error instanceof Error ? error.message.replace(/^error parsing regexp: /, "") : "";
    return { ok: false, message: `invalid regex: ${message || "not a regular expression RE2 accepts"}` };
  }
  if (re.programSize() > MAX_PATTERN_PROGRAM) return tooLarge();
  // testExact: anchored at both ends, answered by the DFA without capture groups.
  return { ok: true, matches: (name) => re.testExact(name) };
}

function tooLarge(): ContainerNameMatcher {
  return {
    ok: false,
    message: `invalid regex: expands to more than ${MAX_PATTERN_PROGRAM} steps; use smaller repetition counts such as {1,63}`,
  };
}

interface Frame {
  /** Size of the alternatives closed so far. */
  done: number;
  /** Size of the current concatenation. */
  current: number;
  /** Size of the last atom, which a following repetition multiplies. */
  last: number;
}

/**
 * An upper bound of the RE2 program's size, read from the pattern's text in one pass: one step
 * per atom, two per group, one per alternative, two per repetition operator, and a counted
 * repetition `{n,m}` copies its atom m times (with two steps of its own per copy). Invalid syntax is left to the compiler.
 */
export function programBound(pattern: string): number {
  const stack: Frame[] = [{ done: 0, current: 0, last: 0 }];
  const top = () => stack[stack.length - 1] as Frame;
  const atom = (size: number) => {
    top().current += size;
    top().last = size;
  };
  let i = 0;
  while (i < pattern.length) {
    const c = pattern[i] as string;
    if (pattern.startsWith("\\Q", i)) {
      // A quoted literal: one step per character, up to \E (or the end).
      const end = pattern.indexOf("\\E", i + 2);
      const stop = end === -1 ? pattern.length : end + 2;
      atom(stop - i);
      i = stop;
    } else if (c === "\\") {
      i = skipEscape(pattern, i);
      atom(1);
    } else if (c === "[") {
      i = skipClass(pattern, i);
      atom(1);
    } else if (c === "(") {
      const flagsOnly = /^\(\?[a-zA-Z-]*\)/.exec(pattern.slice(i, i + 16));
      if (flagsOnly) {
        i += flagsOnly[0].length;
        continue;
      }
      stack.push({ done: 0, current: 0, last: 0 });
      i += 1;
    } else if (c === ")" && stack.length > 1) {
      const f = stack.pop() as Frame;
      atom(f.done + f.current + 2);
      i += 1;
    } else if (c === "|") {
      const f = top();
      f.done += f.current + 1;
      f.current = 0;
      f.last = 0;
      i += 1;
    } else if (c === "{" && /^\{\d+(,\d*)?\}/.test(pattern.slice(i, i + 24))) {
      const [text, low, high] = /^\{(\d+)(?:,(\d*))?\}/.exec(pattern.slice(i, i + 24)) as RegExpExecArray;
      const n = Number(low);
      const copies = high === undefined ? n : high === "" ? n + 1 : Math.max(n, Number(high));
      const f = top();
      const grown = (f.last + 2) * copies + 2;
      f.current += grown - f.last;
      f.last = grown;
      i += text.length;
    } else if (c === "*" || c === "+" || c === "?") {
      top().current += 2;
      top().last += 2;
      i += 1;
    } else {
      atom(1);
      i += 1;
    }
  }
  return stack.reduce((sum, f) => sum + f.done + f.current + 2, 0) + 4;
}

/** Index after the escape at `i`: `\x`, `\pL`, `\p{Greek}`, `\x{263a}`. */
function skipEscape(pattern: string, i: number): number {
  const next = pattern[i + 1];
  if ((next === "p" || next === "P" || next === "x") && pattern[i + 2] === "{") {
    const end = pattern.indexOf("}", i + 3);
    return end === -1 ? pattern.length : end + 1;
  }
  if (next === "p" || next === "P" || next === "x") return i + 3;
  return i + 2;
}

/** Index after the character class opening at `i` (`]` first is a literal, `[:alpha:]` nests). */
function skipClass(pattern: string, i: number): number {
  let j = i + 1;
  if (pattern[j] === "^") j += 1;
  if (pattern[j] === "]") j += 1;
  while (j < pattern.length && pattern[j] !== "]") {
    if (pattern[j] === "\\") j = skipEscape(pattern, j);
    else if (pattern.startsWith("[:", j)) {
      const end = pattern.indexOf(":]", j + 2);
      j = end === -1 ? j + 1 : end + 2;
    } else j += 1;
  }
  return j + 1;
}
