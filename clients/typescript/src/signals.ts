// abortOnSignals: SIGTERM and SIGINT as an AbortSignal, the way a pod's
// container is asked to stop.

/**
 * An AbortSignal that aborts on the first of `signals` (default SIGTERM and
 * SIGINT): pass it to `run` to stop gracefully. A second signal exits the
 * process at once (status 128 + signal number), for a Ctrl-C that means it.
 */
export function abortOnSignals(signals: NodeJS.Signals[] = ["SIGTERM", "SIGINT"]): AbortSignal {
  const controller = new AbortController();
  const handler = (sig: NodeJS.Signals): void => {
    if (!controller.signal.aborted) {
      controller.abort(new Error(`received ${sig}`));
      return;
    }
    const numbers: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGTERM: 15 };
    process.exit(128 + (numbers[sig] ?? 0));
  };
  for (const sig of signals) process.on(sig, handler);
  return controller.signal;
}
