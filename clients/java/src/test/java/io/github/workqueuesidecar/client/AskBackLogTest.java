package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.logging.SimpleFormatter;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import workqueue.v1.Workqueue.WorkResponse;

/**
 * Leases the sidecar asks back (a Cancel not revoked, an Extended with cancel), against a sidecar
 * faked in-process: a sidecar that stops, or whose shard slots move to another replica (up to 4,096
 * at once), asks back every lease it holds, so each is logged at DEBUG, one line per key, never at
 * INFO; a revoked lease is still a lost one, a WARNING.
 */
class AskBackLogTest {
  private static String key(long token) {
    return "ns/k" + token;
  }

  @Test
  @DisplayName("leases asked back are cancelled and logged at DEBUG, one line each; a revoked one is a lost-lease WARNING")
  void askedBackLeasesAreLoggedAtDebug() throws Exception {
    Logger log = Logger.getLogger(Session.class.getName());
    Level level = log.getLevel();
    List<LogRecord> records = new CopyOnWriteArrayList<>();
    Handler handler = new Handler() {
      @Override
      public void publish(LogRecord r) {
        records.add(r);
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    log.setLevel(Level.ALL);
    log.addHandler(handler);
    int moved = 16;
    long extended = moved + 1;
    long revoked = moved + 2;
    Map<Long, CancellationSignal> signals = new ConcurrentHashMap<>();
    CountDownLatch release = new CountDownLatch(1);
    try (FakeWorkServer fake = FakeWorkServer.start(FakeWorkServer.FinishAnswer.NONE);
        WorkqueueClient client = WorkqueueClient.connect(fake.target());
        Worker w = client.queue("default").start((req, signal) -> {
          signals.put(req.lease().token(), signal);
          release.await(60, TimeUnit.SECONDS);
          return Result.done();
        }, RunOptions.concurrency(moved + 2));
        AutoCloseable unblock = release::countDown) {
      eventually("the stream open", fake::opened);
      for (long token = 1; token <= revoked; token++) {
        fake.lease(key(token), token);
      }
      eventually("every reconcile to start", () -> signals.size() == moved + 2);
      records.clear();
      for (long token = 1; token <= moved; token++) {
        fake.send(WorkResponse.newBuilder().setCancel(WorkResponse.Cancel.newBuilder()
            .setKey(key(token)).setToken(token).setMessage("shard slot moved")).build());
      }
      fake.send(WorkResponse.newBuilder().setExtended(WorkResponse.Extended.newBuilder()
          .setKey(key(extended)).setToken(extended).setTtl(Protos.duration(FakeWorkServer.LEASE_TTL)).setCancel(true)).build());
      eventually("every lease asked back cancelled", () -> {
        for (long token = 1; token <= extended; token++) {
          if (!signals.get(token).isCancelled()) {
            return false;
          }
        }
        return true;
      });
      List<LogRecord> asked = List.copyOf(records);
      assertEquals(moved + 1, asked.size(), () -> asked.stream().map(AskBackLogTest::line).toList().toString());
      for (int i = 0; i < asked.size(); i++) {
        LogRecord r = asked.get(i);
        assertEquals(Level.FINE, r.getLevel(), line(r));
        assertTrue(line(r).contains(key(i + 1) + ":") || line(r).endsWith(key(i + 1)), line(r));
        assertEquals(Optional.of(CancellationSignal.Cause.STOP_REQUESTED), signals.get((long) i + 1).cause());
      }

      records.clear();
      fake.revoke(key(revoked), revoked, "leadership lost");
      eventually("the revoked lease cancelled", () -> signals.get(revoked).isCancelled());
      List<LogRecord> lost = List.copyOf(records);
      assertEquals(1, lost.size(), () -> lost.stream().map(AskBackLogTest::line).toList().toString());
      assertEquals(Level.WARNING, lost.get(0).getLevel());
      assertTrue(line(lost.get(0)).contains("lost") && line(lost.get(0)).contains(key(revoked)), line(lost.get(0)));
      assertEquals(Optional.of(CancellationSignal.Cause.LEASE_LOST), signals.get(revoked).cause());
    } finally {
      log.removeHandler(handler);
      log.setLevel(level);
    }
  }

  private static String line(LogRecord r) {
    return r.getLevel() + " " + new SimpleFormatter().formatMessage(r);
  }
}
