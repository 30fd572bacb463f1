/**
 * Every alert as one JSON line on stdout, for log shippers (logs go to stderr, so the two
 * never mix). On Linux, writes to a pipe or file are synchronous in Node, so a line is
 * complete before the next one starts and nothing is buffered without bound.
 */
export type LineSink = (line: string) => void;

export function stdoutSink(): LineSink {
  return (line) => {
    process.stdout.write(`${line}\n`);
  };
}
