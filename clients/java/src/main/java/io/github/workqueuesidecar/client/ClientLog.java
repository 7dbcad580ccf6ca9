package io.github.workqueuesidecar.client;

import java.lang.System.Logger.Level;
import java.text.MessageFormat;
import java.time.Instant;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.LogRecord;

/**
 * The library's logger: a {@link System.Logger} (routed to java.util.logging unless the application
 * binds another backend) that keeps the lines of a stop run by a JVM shutdown hook.
 *
 * <p>java.util.logging registers a shutdown hook of its own (LogManager's Cleaner) that resets it:
 * every handler is closed and removed, so whatever is logged after it ran goes nowhere. Shutdown
 * hooks run concurrently in no set order, and a library cannot replace the LogManager (only the
 * application can, with {@code -Djava.util.logging.manager}). So while a stop started by {@link
 * Worker#stopOnShutdown()} runs, a line at INFO or above is also written to {@code System.err} when
 * java.util.logging is the backend and its root logger has lost the handlers it had when the hook
 * was registered: without it a SIGTERM's "stopping" and "stopped" lines vanish.
 *
 * <p>With java.util.logging as the backend the records are made here, naming the class and method
 * that logged (through System.Logger they would all name this class).
 */
final class ClientLog {
  /** The class of java.util.logging's LoggerFinder: System.Logger's backend when no other is bound. */
  private static final String JUL_FINDER = "sun.util.logging.internal.LoggingProviderImpl";
  private static final boolean JUL = julIsBackend();
  private static final StackWalker STACK = StackWalker.getInstance();
  /** Stops running in a shutdown hook now. */
  private static final AtomicInteger shutdownStops = new AtomicInteger();
  /** java.util.logging is the backend and its root logger had handlers when a hook was registered. */
  private static volatile boolean julHadHandlers;

  private final System.Logger logger;
  private final String name;

  private ClientLog(String name) {
    this.logger = System.getLogger(name);
    this.name = name;
  }

  static ClientLog of(Class<?> c) {
    return new ClientLog(c.getName());
  }

  /** Logs like {@link System.Logger#log(Level, String, Object...)}: {@code format} is a MessageFormat pattern. */
  void log(Level level, String format, Object... params) {
    if (JUL) {
      julLog(level, format, params, null);
    } else {
      logger.log(level, format, params);
    }
    if (julWasReset(level)) {
      stderr(level, params.length == 0 ? format : MessageFormat.format(format, params));
    }
  }

  void log(Level level, String message, Throwable thrown) {
    if (JUL) {
      julLog(level, message, null, thrown);
    } else {
      logger.log(level, message, thrown);
    }
    if (julWasReset(level)) {
      stderr(level, message + ": " + thrown);
    }
  }

  /** A java.util.logging record as System.Logger would make it, its source the caller of log. */
  private void julLog(Level level, String message, Object[] params, Throwable thrown) {
    java.util.logging.Logger jul = java.util.logging.Logger.getLogger(name);
    java.util.logging.Level julLevel = julLevel(level);
    if (!jul.isLoggable(julLevel)) {
      return;
    }
    LogRecord r = new LogRecord(julLevel, message);
    r.setLoggerName(name);
    if (params != null && params.length > 0) {
      r.setParameters(params);
    }
    r.setThrown(thrown);
    STACK.walk(frames -> frames.filter(f -> !f.getClassName().equals(ClientLog.class.getName())).findFirst()).ifPresent(f -> {
      r.setSourceClassName(f.getClassName());
      r.setSourceMethodName(f.getMethodName());
    });
    jul.log(r);
  }

  /** The JDK's own mapping of System.Logger levels onto java.util.logging's. */
  private static java.util.logging.Level julLevel(Level level) {
    return switch (level) {
      case ALL -> java.util.logging.Level.ALL;
      case TRACE -> java.util.logging.Level.FINER;
      case DEBUG -> java.util.logging.Level.FINE;
      case INFO -> java.util.logging.Level.INFO;
      case WARNING -> java.util.logging.Level.WARNING;
      case ERROR -> java.util.logging.Level.SEVERE;
      case OFF -> java.util.logging.Level.OFF;
    };
  }

  private static boolean julIsBackend() {
    try {
      return JUL_FINDER.equals(System.LoggerFinder.getLoggerFinder().getClass().getName());
    } catch (SecurityException | LinkageError e) {
      return false; // no way to tell: leave it all to System.Logger
    }
  }

  /**
   * Called as a shutdown hook is registered: remembers whether java.util.logging backs the
   * library's logs with handlers, so that their loss later can be told from a configuration without.
   */
  static void shutdownHookRegistered() {
    julHadHandlers = JUL && java.util.logging.Logger.getLogger("").getHandlers().length > 0;
  }

  /** Runs a shutdown hook's stop; its lines outlive java.util.logging's reset meanwhile. */
  static void duringShutdown(Runnable stop) {
    shutdownStops.incrementAndGet();
    try {
      stop.run();
    } finally {
      shutdownStops.decrementAndGet();
    }
  }

  private static boolean julWasReset(Level level) {
    return level.getSeverity() >= Level.INFO.getSeverity()
        && shutdownStops.get() > 0
        && julHadHandlers
        && java.util.logging.Logger.getLogger("").getHandlers().length == 0;
  }

  private void stderr(Level level, String text) {
    System.err.println(Instant.now() + " " + level.getName() + " " + name + ": " + text);
  }
}
