package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.net.InetSocketAddress;
import java.time.Duration;
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
import workqueue.v1.WorkQueueServiceGrpc;
import workqueue.v1.Workqueue.Lease;
import workqueue.v1.Workqueue.WorkRequest;
import workqueue.v1.Workqueue.WorkResponse;

/**
 * Leases the sidecar asks back (a Cancel not revoked, an Extended with cancel), against a sidecar
 * faked in-process: a sidecar that stops, or whose shard slots move to another replica (up to 4,096
 * at once), asks back every lease it holds, so each is logged at DEBUG, one line per key, never at
 * INFO; a revoked lease is still a lost one, a WARNING.
 */
class AskBackLogTest {
  private static final Duration TTL = Duration.ofSeconds(30);

  /** One Work stream: Opened, then what the test sends. */
  private static final class FakeWork extends WorkQueueServiceGrpc.WorkQueueServiceImplBase {
    volatile StreamObserver<WorkResponse> out;

    @Override
    public StreamObserver<WorkRequest> work(StreamObserver<WorkResponse> responses) {
      return new StreamObserver<>() {
        @Override
        public void onNext(WorkRequest req) {
          if (req.getKindCase() == WorkRequest.KindCase.OPEN) {
            send(responses, WorkResponse.newBuilder().setOpened(WorkResponse.Opened.newBuilder()
                .setLeaseTtl(Protos.duration(TTL)).setMaxCredits(100).setCredits(req.getOpen().getCredits())
                .setAckFailuresOnly(true)).build());
            out = responses;
          }
        }

        @Override
        public void onError(Throwable t) {}

        @Override
        public void onCompleted() {
          synchronized (responses) {
            responses.onCompleted();
          }
        }
      };
    }

    void send(WorkResponse msg) {
      send(out, msg);
    }

    private static void send(StreamObserver<WorkResponse> out, WorkResponse msg) {
      synchronized (out) {
        out.onNext(msg);
      }
    }
  }

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
    FakeWork fake = new FakeWork();
    Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0)).addService(fake).build().start();
    int moved = 16;
    long extended = moved + 1;
    long revoked = moved + 2;
    Map<Long, CancellationSignal> signals = new ConcurrentHashMap<>();
    CountDownLatch release = new CountDownLatch(1);
    try (WorkqueueClient client = WorkqueueClient.connect("127.0.0.1:" + server.getPort());
        Worker w = client.queue("default").start((req, signal) -> {
          signals.put(req.lease().token(), signal);
          release.await(60, TimeUnit.SECONDS);
          return Result.done();
        }, RunOptions.concurrency(moved + 2));
        AutoCloseable unblock = release::countDown) {
      eventually("the stream open", () -> fake.out != null);
      for (long token = 1; token <= revoked; token++) {
        fake.send(WorkResponse.newBuilder().setLease(Lease.newBuilder().setKey(key(token)).setToken(token).setTtl(Protos.duration(TTL))).build());
      }
      eventually("every reconcile to start", () -> signals.size() == moved + 2);
      records.clear();
      for (long token = 1; token <= moved; token++) {
        fake.send(WorkResponse.newBuilder().setCancel(WorkResponse.Cancel.newBuilder()
            .setKey(key(token)).setToken(token).setMessage("shard slot moved")).build());
      }
      fake.send(WorkResponse.newBuilder().setExtended(WorkResponse.Extended.newBuilder()
          .setKey(key(extended)).setToken(extended).setTtl(Protos.duration(TTL)).setCancel(true)).build());
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
      fake.send(WorkResponse.newBuilder().setCancel(WorkResponse.Cancel.newBuilder()
          .setKey(key(revoked)).setToken(revoked).setRevoked(true).setMessage("leadership lost")).build());
      eventually("the revoked lease cancelled", () -> signals.get(revoked).isCancelled());
      List<LogRecord> lost = List.copyOf(records);
      assertEquals(1, lost.size(), () -> lost.stream().map(AskBackLogTest::line).toList().toString());
      assertEquals(Level.WARNING, lost.get(0).getLevel());
      assertTrue(line(lost.get(0)).contains("lost") && line(lost.get(0)).contains(key(revoked)), line(lost.get(0)));
      assertEquals(Optional.of(CancellationSignal.Cause.LEASE_LOST), signals.get(revoked).cause());
    } finally {
      log.removeHandler(handler);
      log.setLevel(level);
      server.shutdownNow();
    }
  }

  private static String line(LogRecord r) {
    return r.getLevel() + " " + new SimpleFormatter().formatMessage(r);
  }
}
