package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
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
 * A lease for a key whose earlier reconcile still runs in this process (its lease lost, its signal
 * ignored), against a sidecar faked in-process so that the test says when each lease comes and
 * goes: it waits in its slot, and lost while it waits it is never started.
 */
class KeyWaitTest {
  /** Long enough that no lease expires during the test: only the test's Cancels end them. */
  private static final Duration TTL = Duration.ofSeconds(30);

  /** One Work stream: Opened, then what the test sends; it records the Finishes. */
  private static final class FakeWork extends WorkQueueServiceGrpc.WorkQueueServiceImplBase {
    final List<WorkRequest.Finish> finishes = new CopyOnWriteArrayList<>();
    volatile StreamObserver<WorkResponse> out;

    @Override
    public StreamObserver<WorkRequest> work(StreamObserver<WorkResponse> responses) {
      return new StreamObserver<>() {
        @Override
        public void onNext(WorkRequest req) {
          switch (req.getKindCase()) {
            case OPEN -> {
              send(responses, WorkResponse.newBuilder().setOpened(WorkResponse.Opened.newBuilder()
                  .setLeaseTtl(Protos.duration(TTL)).setMaxCredits(100).setCredits(req.getOpen().getCredits())
                  .setAckFailuresOnly(true)).build());
              out = responses;
            }
            case FINISH -> finishes.add(req.getFinish());
            default -> {} // extends and credits go unanswered: no lease nears its TTL
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

    void lease(String key, long token) {
      send(out, WorkResponse.newBuilder().setLease(Lease.newBuilder().setKey(key).setToken(token).setTtl(Protos.duration(TTL))).build());
    }

    void revoke(String key, long token) {
      send(out, WorkResponse.newBuilder().setCancel(WorkResponse.Cancel.newBuilder()
          .setKey(key).setToken(token).setRevoked(true).setMessage("revoked by the test")).build());
    }

    /** Each Finish as "token outcome", in the order they came. */
    List<String> finished() {
      return finishes.stream().map(f -> f.getToken() + " " + f.getOutcomeCase()).toList();
    }

    private static void send(StreamObserver<WorkResponse> out, WorkResponse msg) {
      synchronized (out) {
        out.onNext(msg);
      }
    }
  }

  @Test
  @DisplayName("a lease for a key whose lost reconcile still runs waits in its slot, and is never started if lost meanwhile")
  void aLeaseLostWhileItWaitsForItsKeyNeverStarts() throws Exception {
    Logger log = Logger.getLogger(Worker.class.getName());
    List<String> lines = new CopyOnWriteArrayList<>();
    Handler handler = new Handler() {
      @Override
      public void publish(LogRecord r) {
        lines.add(new SimpleFormatter().formatMessage(r));
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    log.addHandler(handler);
    FakeWork fake = new FakeWork();
    Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0)).addService(fake).build().start();
    CountDownLatch release = new CountDownLatch(1);
    List<Long> started = new CopyOnWriteArrayList<>();
    try (WorkqueueClient client = WorkqueueClient.connect("127.0.0.1:" + server.getPort());
        Worker w = client.queue("default").start((req, signal) -> {
          started.add(req.lease().token());
          if (req.lease().token() == 1) {
            release.await(60, TimeUnit.SECONDS); // ignores its signal
          }
          return Result.done();
        }, RunOptions.concurrency(3));
        // Closed first: a failed assertion does not leave the worker's stop waiting on it.
        AutoCloseable unblock = release::countDown) {
      eventually("the stream open", () -> fake.out != null);
      fake.lease("ns/a", 1);
      eventually("the first reconcile to start", () -> started.size() == 1);
      fake.revoke("ns/a", 1); // lost; its reconcile goes on
      fake.lease("ns/a", 2);
      eventually("the second lease to wait for the key", () -> lines.stream().anyMatch(l -> l.contains("waiting for the earlier reconcile of ns/a")));
      fake.revoke("ns/a", 2); // lost while it waits
      eventually("the lost waiting lease answered", () -> fake.finished().contains("2 RETRY"));
      fake.lease("ns/a", 3);
      Thread.sleep(200);
      assertEquals(List.of(1L), started, "a lease started while an earlier reconcile of its key ran");
      release.countDown();
      eventually("the third lease finished once the first reconcile returned", () -> fake.finished().size() == 3);
      assertEquals(List.of(1L, 3L), started, "the lease lost while it waited was started");
      // The lost lease 2 is answered first; the lost reconcile's Finish (1) and
      // the third lease's race once the first reconcile returns.
      List<String> finished = fake.finished();
      assertEquals("2 RETRY", finished.get(0));
      assertEquals(Set.of("1 RETRY", "3 SUCCESS"), Set.copyOf(finished.subList(1, 3)));
    } finally {
      log.removeHandler(handler);
      server.shutdownNow();
    }
  }
}
