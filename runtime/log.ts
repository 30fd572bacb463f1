/**
 * Structured logging: one JSON object per line on stderr (stdout carries alerts only, so
 * log shippers can tell them apart). Level from HIVE_LOG_LEVEL (debug|info|warn|error).
 * Every string (message and fields, error messages included) goes through `displaySafe`:
 * fields carry text containers control (paths, symlink targets, process names), which must
 * neither forge lines nor escape sequences in a terminal, nor grow a line without bound.
 */
import { displaySafe, displaySafeDeep } from "./text.ts";

export type LogLevel = "debug" | "info" | "warn" | "error";
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export type Fields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
  child(fields: Fields): Logger;
}

export type LogSink = (line: string) => void;

function serialise(value: unknown): unknown {
  if (value instanceof Error) {
    const out: Record<string, unknown> = { message: value.message, name: value.name };
    for (const [k, v] of Object.entries(value)) out[k] = serialise(v);
    if (value.cause !== undefined) out.cause = serialise(value.cause);
    return out;
  }
  if (typeof value === "bigint") return value.toString();
  return value;
}

export function createLogger(base: Fields = {}, options: { level?: LogLevel; sink?: LogSink } = {}): Logger {
  const threshold = ORDER[options.level ?? (process.env.HIVE_LOG_LEVEL as LogLevel) ?? "info"] ?? ORDER.info;
  const sink = options.sink ?? ((line: string) => process.stderr.write(`${line}\n`));
  const emit = (level: LogLevel, msg: string, fields?: Fields) => {
    if (ORDER[level] < threshold) return;
    const record: Record<string, unknown> = { time: new Date().toISOString(), level, msg: displaySafe(msg) };
    for (const [k, v] of Object.entries({ ...base, ...fields })) record[k] = displaySafeDeep(serialise(v));
    sink(JSON.stringify(record));
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    child: (fields) => createLogger({ ...base, ...fields }, { level: options.level, sink }),
  };
}
