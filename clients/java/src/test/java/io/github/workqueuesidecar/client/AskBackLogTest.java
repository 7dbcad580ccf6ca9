package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.LogRecord;
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
    int moved = 16;
    long extended = moved + 1;
    long revoked = moved + 2;
    Map<Long, CancellationSignal> signals = new ConcurrentHashMap<>();
    CountDownLatch release = new CountDownLatch(1);
    try (LogRecords records = new LogRecords(Session.class);
        FakeWorkServer fake = FakeWorkServer.start(FakeWorkServer.FinishAnswer.NONE);
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
      List<LogRecord> asked = records.all();
      assertEquals(moved + 1, asked.size(), () -> asked.stream().map(LogRecords::line).toList().toString());
      for (int i = 0; i < asked.size(); i++) {
        LogRecord r = asked.get(i);
        String line = LogRecords.line(r);
        assertEquals(Level.FINE, r.getLevel(), line);
        assertTrue(line.contains(key(i + 1) + ":") || line.endsWith(key(i + 1)), line);
        assertEquals(Optional.of(CancellationSignal.Cause.STOP_REQUESTED), signals.get((long) i + 1).cause());
      }

      records.clear();
      fake.revoke(key(revoked), revoked, "leadership lost");
      eventually("the revoked lease cancelled", () -> signals.get(revoked).isCancelled());
      List<LogRecord> lost = records.all();
      assertEquals(1, lost.size(), () -> lost.stream().map(LogRecords::line).toList().toString());
      assertEquals(Level.WARNING, lost.get(0).getLevel());
      String line = LogRecords.line(lost.get(0));
      assertTrue(line.contains("lost") && line.contains(key(revoked)), line);
      assertEquals(Optional.of(CancellationSignal.Cause.LEASE_LOST), signals.get(revoked).cause());
    }
  }
}
