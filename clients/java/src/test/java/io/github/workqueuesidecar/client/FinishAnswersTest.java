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
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.logging.Handler;
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
 * What the worker makes of Finish answers, from a sidecar faked in-process that hands out two leases,
 * revokes one at once and refuses its Finish late (later than a TTL after it went out). An older
 * sidecar (Opened.ack_failures_only false) answers every Finish, and the worker treats the answers as
 * before; one that honours the flag answers only the refusal, and the worker has forgotten the lost
 * lease's token by then, so nothing it holds grows over a long stream.
 */
class FinishAnswersTest {
  /** The fake's lease TTL; the lost lease's refusal comes later than that. */
  private static final Duration TTL = Duration.ofSeconds(1);
  private static final long LATE_MS = 1_500;

  /** One Work stream of the fake: leases ns/ok (1) and ns/lost (2, revoked at once). */
  private static final class FakeWork extends WorkQueueServiceGrpc.WorkQueueServiceImplBase {
    final ScheduledExecutorService later = Executors.newSingleThreadScheduledExecutor();
    final List<WorkRequest.Finish> finishes = new CopyOnWriteArrayList<>();
    /** Honours Open.ack_failures_only (echoed in Opened); false is a sidecar older than the field. */
    final boolean honoursAckFailuresOnly;
    volatile boolean askedForFailuresOnly;

    FakeWork(boolean honoursAckFailuresOnly) {
      this.honoursAckFailuresOnly = honoursAckFailuresOnly;
    }

    @Override
    public StreamObserver<WorkRequest> work(StreamObserver<WorkResponse> out) {
      return new StreamObserver<>() {
        @Override
        public void onNext(WorkRequest req) {
          switch (req.getKindCase()) {
            case OPEN -> {
              askedForFailuresOnly = req.getOpen().getAckFailuresOnly();
              boolean failuresOnly = honoursAckFailuresOnly && askedForFailuresOnly;
              send(out, WorkResponse.newBuilder().setOpened(WorkResponse.Opened.newBuilder()
                  .setLeaseTtl(Protos.duration(TTL)).setMaxCredits(100).setCredits(req.getOpen().getCredits())
                  .setAckFailuresOnly(failuresOnly)).build());
              send(out, lease("ns/ok", 1));
              send(out, lease("ns/lost", 2));
              send(out, WorkResponse.newBuilder().setCancel(WorkResponse.Cancel.newBuilder()
                  .setKey("ns/lost").setToken(2).setRevoked(true).setMessage("revoked by the test")).build());
            }
            case FINISH -> {
              WorkRequest.Finish f = req.getFinish();
              finishes.add(f);
              WorkResponse.FinishAck.Builder ack = WorkResponse.FinishAck.newBuilder().setKey(f.getKey()).setToken(f.getToken());
              if (f.getToken() == 2) {
                // The lost lease's refusal, later than a TTL after its Finish went out.
                WorkResponse refusal = WorkResponse.newBuilder().setFinishAck(ack.setCode(9).setMessage("stale token")).build();
                later.schedule(() -> send(out, refusal), LATE_MS, TimeUnit.MILLISECONDS);
              } else if (!(honoursAckFailuresOnly && askedForFailuresOnly)) {
                send(out, WorkResponse.newBuilder().setFinishAck(ack.setCode(0)).build());
              }
            }
            default -> {} // extends and credits go unanswered: the test is over before they matter
          }
        }

        @Override
        public void onError(Throwable t) {}

        @Override
        public void onCompleted() {
          synchronized (out) {
            out.onCompleted();
          }
        }
      };
    }

    private static Lease.Builder lease(String key, long token) {
      return Lease.newBuilder().setKey(key).setToken(token).setTtl(Protos.duration(TTL));
    }

    private static void send(StreamObserver<WorkResponse> out, Lease.Builder lease) {
      send(out, WorkResponse.newBuilder().setLease(lease).build());
    }

    private static void send(StreamObserver<WorkResponse> out, WorkResponse msg) {
      synchronized (out) {
        try {
          out.onNext(msg);
        } catch (RuntimeException ended) {
          // the stream ended meanwhile
        }
      }
    }
  }

  @Test
  @DisplayName("an older sidecar's answers are treated as before: a lost lease's refusal is expected however late, an OK is silent")
  void olderSidecarAnswersEveryFinish() throws Exception {
    FakeWork fake = new FakeWork(false);
    List<String> lines = run(fake);
    assertTrue(fake.askedForFailuresOnly, "Open did not ask for ack_failures_only");
    assertTrue(lines.stream().anyMatch(l -> l.contains("every finish answered")), String.join("\n", lines));
    assertEquals(List.of(), lines.stream().filter(l -> l.contains("refused the finish")).toList(),
        "a lost lease's refusal (or an OK) was warned of as unexpected");
  }

  @Test
  @DisplayName("with only failures answered, a lost lease's token is forgotten a TTL after its Finish: a refusal later than that is warned of")
  void unansweredLostFinishIsForgottenAfterATtl() throws Exception {
    FakeWork fake = new FakeWork(true);
    List<String> lines = run(fake);
    assertTrue(lines.stream().anyMatch(l -> l.contains("only failed finishes answered")), String.join("\n", lines));
    assertEquals(1, lines.stream().filter(l -> l.startsWith("WARNING ") && l.contains("refused the finish of ns/lost")).count(),
        "the lost lease's token was still awaited " + LATE_MS + " ms after its Finish (TTL " + TTL + "):\n" + String.join("\n", lines));
  }

  /** Runs a worker against the fake until the late refusal has come; returns what the session logged. */
  private static List<String> run(FakeWork fake) throws Exception {
    Logger log = Logger.getLogger(Session.class.getName());
    List<String> lines = new CopyOnWriteArrayList<>();
    Handler handler = new Handler() {
      @Override
      public void publish(LogRecord r) {
        lines.add(r.getLevel() + " " + new SimpleFormatter().formatMessage(r));
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    log.addHandler(handler);
    Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0)).addService(fake).build().start();
    try (WorkqueueClient client = WorkqueueClient.connect("127.0.0.1:" + server.getPort());
        Worker w = client.queue("default").start((req, signal) -> {
          if (req.key().equals("ns/lost")) { // when it starts before its Cancel is read
            CountDownLatch fired = new CountDownLatch(1);
            signal.onCancel(fired::countDown);
            fired.await(30, TimeUnit.SECONDS);
          }
          return Result.done();
        }, RunOptions.concurrency(2))) {
      eventually("both Finishes sent", () -> fake.finishes.size() == 2);
      Thread.sleep(LATE_MS + 500); // the late refusal has come
    } finally {
      log.removeHandler(handler);
      server.shutdownNow();
      fake.later.shutdownNow();
    }
    assertEquals("ns/lost", fake.finishes.stream().filter(f -> f.getToken() == 2).findFirst().orElseThrow().getKey());
    return lines;
  }
}
