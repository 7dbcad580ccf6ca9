package io.github.workqueuesidecar.client;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.logging.SimpleFormatter;

/**
 * What the client's loggers wrote while open, at every level, for tests that check what a worker
 * logs and at which level (a lost lease is one WARNING, a lease asked back DEBUG). Closing it puts
 * the loggers back as they were.
 */
final class LogRecords extends Handler implements AutoCloseable {
  private final List<Logger> loggers = new ArrayList<>();
  private final List<Level> levels = new ArrayList<>();
  private final List<LogRecord> records = new CopyOnWriteArrayList<>();

  /** Records what the loggers of {@code sources} (the client's classes) write. */
  LogRecords(Class<?>... sources) {
    for (Class<?> source : sources) {
      Logger log = Logger.getLogger(source.getName());
      loggers.add(log);
      levels.add(log.getLevel());
      log.setLevel(Level.ALL);
      log.addHandler(this);
    }
  }

  /** Every record so far, in the order they came. */
  List<LogRecord> all() {
    return List.copyOf(records);
  }

  /** Forgets the records so far: what a test checks comes after. */
  void clear() {
    records.clear();
  }

  /** Each record at {@code least} or above, as "LEVEL message". */
  List<String> lines(Level least) {
    return records.stream().filter(r -> r.getLevel().intValue() >= least.intValue()).map(LogRecords::line).toList();
  }

  /** Each record's message, formatted, without its level. */
  List<String> messages() {
    return records.stream().map(r -> new SimpleFormatter().formatMessage(r)).toList();
  }

  /** A record as "LEVEL message" (java.util.logging's names: DEBUG is FINE). */
  static String line(LogRecord r) {
    return r.getLevel() + " " + new SimpleFormatter().formatMessage(r);
  }

  @Override
  public void publish(LogRecord r) {
    records.add(r);
  }

  @Override
  public void flush() {}

  @Override
  public void close() {
    for (int i = 0; i < loggers.size(); i++) {
      loggers.get(i).removeHandler(this);
      loggers.get(i).setLevel(levels.get(i));
    }
  }
}
