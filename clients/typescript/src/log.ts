// Logger: where the client reports what it does, console-shaped so `console`
// itself (or pino, or winston) fits.

/** What the client logs through; `console` fits. */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/**
 * At most this many characters of an error's text go to the log: a
 * reconcile's error is logged on every failure, and the key's last_error
 * (cut by the sidecar at 4 KiB) keeps the rest.
 */
export const MAX_LOGGED_ERROR_CHARS = 1024;

/**
 * An error's text as one bounded log line: line breaks and other control
 * characters become spaces (a multi-line message would read as several
 * entries), and past MAX_LOGGED_ERROR_CHARS it is cut, saying how much.
 */
export function logLine(text: string): string {
  const flat = text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, " ");
  const chars = Array.from(flat); // code points: a cut never splits a surrogate pair
  if (chars.length <= MAX_LOGGED_ERROR_CHARS) return flat;
  return `${chars.slice(0, MAX_LOGGED_ERROR_CHARS).join("")}… (${chars.length - MAX_LOGGED_ERROR_CHARS} more characters)`;
}

const write =
  (sink: (line: string) => void) =>
  (message: string, fields?: Record<string, unknown>): void => {
    const extra = fields === undefined ? "" : ` ${JSON.stringify(fields, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v instanceof Error ? v.message : v))}`;
    sink(`workqueue: ${message}${extra}`);
  };

/**
 * The default logger: warnings and errors to stderr, nothing else; with
 * WQS_CLIENT_LOG=debug (or info) in the environment, those levels too.
 */
export function defaultLogger(): Logger {
  const level = process.env["WQS_CLIENT_LOG"] ?? "warn";
  const none = (): void => {};
  const err = write((line) => process.stderr.write(`${line}\n`));
  return {
    debug: level === "debug" ? err : none,
    info: level === "debug" || level === "info" ? err : none,
    warn: err,
    error: err,
  };
}
