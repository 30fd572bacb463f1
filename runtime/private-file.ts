/**
 * The small JSON files the agent and `hive watch` keep beside the pinned maps for `hive status`
 * (the watch table, the allowed-access counts): written atomically, readable by root only
 * (they name what is watched and which programs read trapped files), absent until written.
 */
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { HiveError } from "../api/errors.ts";

/** Writes `content` as JSON to a temporary file (0600) and renames it over `file`. */
export async function writePrivateJsonFile(file: string, content: unknown): Promise<void> {
  const temp = `${file}.${process.pid}.tmp`;
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  await writeFile(temp, `${JSON.stringify(content, null, 2)}\n`, { mode: 0o600 });
  await rename(temp, file);
}

/** The file's text, or undefined when it does not exist; `what` names it in the error. */
export async function readFileIfPresent(file: string, what: string): Promise<string | undefined> {
  try {
    return await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new HiveError("InputUnreadable", `cannot read the ${what}`, { object: file, cause: error });
  }
}
