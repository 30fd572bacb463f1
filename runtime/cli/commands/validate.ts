/** `hive validate FILE…` — checks HivePolicy files with the same schema and rules as admission. */
import { isHiveError } from "../../../api/errors.ts";
import {
  formatProblem,
  type PolicyFiles,
  type PolicyProblem,
  readPolicyFiles,
} from "../../standalone/policy-files.ts";
import { type Command, parseCommandArgs, UsageError } from "../command.ts";
import { EXIT } from "../exit-codes.ts";

const help = `Usage: hive validate FILE…

Checks HivePolicy files (YAML or JSON; several documents per file, separated by ---)
against the schema and rules the cluster enforces at admission, without running anything.

Output (stdout): one line per problem,
  FILE:LINE: document N (HivePolicy "NAME"): FIELD: MESSAGE
where N counts the file's documents from 1 and FIELD names the trap and field, e.g.
  spec.traps[0].match.ip: must be an IPv4 address such as 10.0.0.7
A valid file prints FILE: ok (P policies, T traps).

Exit codes: 0 all valid · 1 problems found · 2 usage · 5 a file could not be read
(unreadable files are reported as FILE: cannot read policy file (ERRNO); the rest are still checked).`;

export const validateCommand: Command = {
  help,
  async run(args) {
    const { positionals } = parseCommandArgs(args, {}, true);
    if (positionals.length === 0) throw new UsageError("validate needs at least one FILE");
    let unreadable = 0;
    const problems: PolicyProblem[] = [];
    for (const file of positionals) {
      let parsed: PolicyFiles;
      try {
        parsed = await readPolicyFiles([file]);
      } catch (error) {
        // An unreadable file is reported like any other problem, and the other files are still checked.
        if (!isHiveError(error, "InputUnreadable")) throw error;
        unreadable += 1;
        process.stdout.write(`${file}: ${error.message}; ${error.hint}\n`);
        continue;
      }
      for (const problem of parsed.problems) process.stdout.write(`${formatProblem(problem)}\n`);
      problems.push(...parsed.problems);
      if (parsed.problems.length > 0) continue;
      const traps = parsed.documents.reduce((n, d) => n + d.policy.spec.traps.length, 0);
      const policies = plural(parsed.documents.length, "policy", "policies");
      process.stdout.write(`${file}: ok (${policies}, ${plural(traps, "trap")})\n`);
    }
    if (unreadable > 0) {
      process.stderr.write(`${plural(unreadable, "file")} could not be read\n`);
      return EXIT.io;
    }
    if (problems.length === 0) return EXIT.ok;
    const files = new Set(problems.map((p) => p.file)).size;
    process.stderr.write(`${plural(problems.length, "problem")} in ${plural(files, "file")}\n`);
    return EXIT.invalid;
  },
};

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
