// Logger: where the client reports what it does, console-shaped so `console`
// itself (or pino, or winston) fits.

/** What the client logs through; `console` fits. */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
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
