/**
 * Reads HivePolicy documents from YAML files (one or more documents per file, `---`
 * separated, JSON accepted as YAML) and validates each with the one schema (api/validate.ts).
 * Every problem names the file, the line, the document and the field, so that a user can go
 * straight to it: `policies.yaml:12: document 2 (HivePolicy "web"): spec.traps[0].mode: …`.
 */
import { readFile } from "node:fs/promises";
import { isMap, LineCounter, parseAllDocuments } from "yaml";
import { HiveError } from "../../api/errors.ts";
import { type HivePolicy, validatePolicy } from "../../api/index.ts";

export interface PolicyDocument {
  file: string;
  /** 1-based position of the document in its file. */
  index: number;
  policy: HivePolicy;
}

export interface PolicyProblem {
  file: string;
  /** 1-based line of the offending value (or of the document when the field is absent). */
  line: number;
  /** 1-based document position; absent for problems of the whole file. */
  index?: number;
  /** metadata.name of the document, when it has one. */
  name?: string;
  /** `spec.traps[0].match.ip`, or `(document)` for the document itself. */
  field: string;
  message: string;
}

export interface PolicyFiles {
  documents: PolicyDocument[];
  problems: PolicyProblem[];
}

/** One line per problem, the format `hive validate` prints. */
export function formatProblem(p: PolicyProblem): string {
  const where = `${p.file}:${p.line}`;
  if (p.index === undefined) return `${where}: ${p.message}`;
  const doc = p.name === undefined ? `document ${p.index}` : `document ${p.index} (HivePolicy "${p.name}")`;
  const field = p.field === "(document)" ? "" : `${p.field}: `;
  return `${where}: ${doc}: ${field}${p.message}`;
}

/** `spec.traps[0].match.container-name` → ["spec", "traps", 0, "match", "container-name"]. */
function fieldPath(field: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const match of field.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) {
    if (match[2] !== undefined) out.push(Number(match[2]));
    else if (match[1] !== undefined) out.push(match[1]);
  }
  return out;
}

/** Parses YAML text (the file name is only used in messages); exported for tests and stdin. */
export function parsePolicyText(file: string, text: string): PolicyFiles {
  const lines = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter: lines, uniqueKeys: true });
  const lineOf = (offset: number | undefined) => (offset === undefined ? 1 : lines.linePos(offset).line);
  const result: PolicyFiles = { documents: [], problems: [] };
  if (!Array.isArray(docs)) {
    // An empty stream parses to an EmptyStream (not an array): a file with no documents.
    result.problems.push({ file, line: 1, field: "(file)", message: "contains no YAML document" });
    return result;
  }
  let index = 0;
  for (const doc of docs) {
    index += 1;
    const docLine = lineOf(doc.range[0]);
    if (doc.errors.length > 0) {
      for (const error of doc.errors) {
        result.problems.push({
          file,
          line: lineOf(error.pos[0]),
          index,
          field: "(document)",
          message: `YAML syntax error: ${(error.message.split("\n")[0] ?? "").replace(/ at line \d+, column \d+:?$/, "")}`,
        });
      }
      continue;
    }
    // A trailing `---` or a comment-only document is not a policy; skip it silently.
    if (doc.contents === null) {
      index -= 1;
      continue;
    }
    const value: unknown = doc.toJS({ maxAliasCount: 100 });
    const name = isMap(doc.contents) ? doc.getIn(["metadata", "name"]) : undefined;
    const named = typeof name === "string" ? { name } : {};
    const validation = validatePolicy(value);
    const errors = validation.ok ? [] : [...validation.errors];
    // The API server requires a name; a file that `kubectl apply` would refuse is invalid here too.
    if (typeof name !== "string" && !errors.some((e) => e.field.startsWith("metadata"))) {
      errors.unshift({ field: "metadata.name", message: "is required" });
    }
    if (validation.ok && errors.length === 0) {
      result.documents.push({ file, index, policy: validation.value });
      continue;
    }
    const problems: PolicyProblem[] = [];
    for (const error of errors) {
      const path = fieldPath(error.field);
      // Point at the value itself when it exists, else at the nearest parent that does.
      let line = docLine;
      for (let depth = path.length; depth > 0; depth--) {
        const node = doc.getIn(path.slice(0, depth), true);
        if (node !== undefined && node !== null && typeof node === "object" && "range" in node) {
          const range = (node as { range?: [number, number, number] }).range;
          if (range) {
            line = lineOf(range[0]);
            break;
          }
        }
      }
      problems.push({ file, line, index, ...named, field: error.field, message: error.message });
    }
    // In file order, as an editor shows them (the schema reports in its own order).
    result.problems.push(...problems.sort((a, b) => a.line - b.line));
  }
  if (index === 0)
    result.problems.push({ file, line: 1, field: "(file)", message: "contains no YAML document" });
  return result;
}

/** Reads and validates every file; unreadable files are thrown (they are not policy problems). */
export async function readPolicyFiles(files: readonly string[]): Promise<PolicyFiles> {
  const result: PolicyFiles = { documents: [], problems: [] };
  for (const file of files) {
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (cause) {
      const code = (cause as NodeJS.ErrnoException).code ?? "error";
      throw new HiveError("InputUnreadable", `cannot read policy file (${code})`, {
        object: file,
        hint: code === "ENOENT" ? "check the path" : "check that the file is readable by this user",
        cause,
      });
    }
    const parsed = parsePolicyText(file, text);
    result.documents.push(...parsed.documents);
    result.problems.push(...parsed.problems);
  }
  return result;
}

/** Throws one PolicyInvalid error carrying every problem, for commands that need valid input. */
export function assertNoProblems(files: PolicyFiles): void {
  if (files.problems.length === 0) return;
  const count = files.problems.length;
  const header = `${count} problem${count === 1 ? "" : "s"} in the policy files:`;
  throw new HiveError("PolicyInvalid", [header, ...files.problems.map(formatProblem)].join("\n"), {
    object: [...new Set(files.problems.map((p) => p.file))].join(", "),
    hint: "fix the fields named above (`hive validate FILE…` checks them without running anything)",
  });
}
