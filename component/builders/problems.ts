/** A problem with one option of the component's arguments, phrased so the user can fix it. */
export interface ArgProblem {
  /** The option as the user wrote it: `traps[0].match.ip`, `metricsPort`. */
  option: string;
  /** What is wrong and what to write instead. */
  message: string;
}

/** One line per problem: `traps[0].path: must be an absolute path (start with "/")`. */
export function formatProblems(problems: readonly ArgProblem[]): string {
  return problems.map((p) => `${p.option}: ${p.message}`).join("\n");
}
