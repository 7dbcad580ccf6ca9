package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
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
 * A reconcile that throws {@link LeaseEndedDuringWriteException} (here as the cause of another
 * exception, as a reconciler would wrap it), against a sidecar faked in-process: a write under the
 * lease was made, but the sidecar ended the lease before the API server answered, so the lease is
 * lost. No outcome is sent (the sidecar would refuse it as stale, a WARNING), only the Finish every
 * lost lease gets, whose refusal is expected; one WARNING names the queue, the key and why.
 */
class LeaseEndedDuringWriteTest {
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
            case FINISH -> {
              finishes.add(req.getFinish());
              // The lease had ended: the sidecar refuses any Finish of it as stale.
              send(responses, WorkResponse.newBuilder().setFinishAck(WorkResponse.FinishAck.newBuilder()
                  .setKey(req.getFinish().getKey()).setToken(req.getFinish().getToken())
                  .setCode(Status.Code.FAILED_PRECONDITION.value()).setMessage("stale lease token")).build());
            }
            default -> {}
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

  @Test
  @DisplayName("a reconcile whose lease ended during a write is finished as lost, with one WARNING")
  void aLeaseEndedDuringAWriteIsFinishedAsLost() throws Exception {
    List<Logger> loggers = List.of(Logger.getLogger(Session.class.getName()), Logger.getLogger(Worker.class.getName()));
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
    loggers.forEach(l -> l.addHandler(handler));
    FakeWork fake = new FakeWork();
    Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0)).addService(fake).build().start();
    try (WorkqueueClient client = WorkqueueClient.connect("127.0.0.1:" + server.getPort());
        Worker w = client.queue("default").start((req, signal) -> {
          throw new IllegalStateException("create the child of " + req.key(),
              new LeaseEndedDuringWriteException("the write was made, but the lease ended before the API server answered it"));
        }, RunOptions.concurrency(1))) {
      eventually("the stream open", () -> fake.out != null);
      fake.send(WorkResponse.newBuilder().setLease(Lease.newBuilder().setKey("ns/a").setToken(7).setTtl(Protos.duration(TTL))).build());
      eventually("the lease finished", () -> fake.finishes.size() == 1);
      WorkRequest.Finish finish = fake.finishes.get(0);
      assertEquals(7, finish.getToken());
      assertEquals("lease lost before the worker finished", finish.getRetry().getError(), finish.toString());
      Thread.sleep(200); // the refusal comes back, and is expected
      List<String> loud = records.stream().filter(r -> r.getLevel().intValue() >= Level.WARNING.intValue())
          .map(r -> r.getLevel() + " " + new SimpleFormatter().formatMessage(r)).toList();
      assertEquals(1, loud.size(), loud.toString());
      assertTrue(loud.get(0).startsWith("WARNING") && loud.get(0).contains("ns/a") && loud.get(0).contains("queue default")
          && loud.get(0).contains("lost: lease ended during write"), loud.get(0));
    } finally {
      loggers.forEach(l -> l.removeHandler(handler));
      server.shutdownNow();
    }
  }
}
