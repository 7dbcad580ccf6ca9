package io.github.workqueuesidecar.client;

import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import workqueue.v1.WorkQueueServiceGrpc;
import workqueue.v1.Workqueue.Lease;
import workqueue.v1.Workqueue.WorkRequest;
import workqueue.v1.Workqueue.WorkResponse;

/**
 * A sidecar's Work stream faked in-process on 127.0.0.1, for tests that must say exactly when each
 * lease comes and goes, which the real sidecar decides by itself: it answers Open with Opened,
 * records every Finish, and sends only what the test tells it to. One stream at a time.
 */
final class FakeWorkServer implements AutoCloseable {
  /** Long enough that no lease expires during a test: only what the test sends ends one. */
  static final Duration LEASE_TTL = Duration.ofSeconds(30);

  /** What the fake sends back for a Finish. */
  enum FinishAnswer {
    /** Nothing: Opened says only failed Finishes are answered, and none fails here. */
    NONE,
    /** A refusal as stale (FAILED_PRECONDITION), as the sidecar answers the Finish of a lease it ended. */
    REFUSED_AS_STALE,
  }

  private final FinishAnswer finishAnswer;
  private final List<WorkRequest.Finish> finishes = new CopyOnWriteArrayList<>();
  private final Server server;
  /** The open stream's responses; null until Opened is sent. */
  private volatile StreamObserver<WorkResponse> out;

  private FakeWorkServer(FinishAnswer finishAnswer) throws IOException {
    this.finishAnswer = finishAnswer;
    this.server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0)).addService(new Service()).build().start();
  }

  /** Starts a fake on a free port. */
  static FakeWorkServer start(FinishAnswer finishAnswer) throws IOException {
    return new FakeWorkServer(finishAnswer);
  }

  /** The address a client connects to. */
  String target() {
    return "127.0.0.1:" + server.getPort();
  }

  /** Whether a worker's stream is open (Opened sent): only then can the test send. */
  boolean opened() {
    return out != null;
  }

  /** Every Finish received, in the order they came. */
  List<WorkRequest.Finish> finishes() {
    return List.copyOf(finishes);
  }

  /** Each Finish as "token outcome" (say "2 RETRY"), in the order they came. */
  List<String> finished() {
    return finishes.stream().map(f -> f.getToken() + " " + f.getOutcomeCase()).toList();
  }

  /** Hands out a lease of {@link #LEASE_TTL}. */
  void lease(String key, long token) {
    send(WorkResponse.newBuilder().setLease(Lease.newBuilder().setKey(key).setToken(token).setTtl(Protos.duration(LEASE_TTL))).build());
  }

  /** Ends a lease as the sidecar does when it no longer holds it: the worker has lost it. */
  void revoke(String key, long token, String message) {
    send(WorkResponse.newBuilder().setCancel(WorkResponse.Cancel.newBuilder()
        .setKey(key).setToken(token).setRevoked(true).setMessage(message)).build());
  }

  void send(WorkResponse msg) {
    send(out, msg);
  }

  @Override
  public void close() {
    server.shutdownNow();
  }

  /** The server thread and the test both send: one message at a time on the stream. */
  private static void send(StreamObserver<WorkResponse> out, WorkResponse msg) {
    synchronized (out) {
      out.onNext(msg);
    }
  }

  private final class Service extends WorkQueueServiceGrpc.WorkQueueServiceImplBase {
    @Override
    public StreamObserver<WorkRequest> work(StreamObserver<WorkResponse> responses) {
      return new StreamObserver<>() {
        @Override
        public void onNext(WorkRequest req) {
          switch (req.getKindCase()) {
            case OPEN -> {
              send(responses, WorkResponse.newBuilder().setOpened(WorkResponse.Opened.newBuilder()
                  .setLeaseTtl(Protos.duration(LEASE_TTL)).setMaxCredits(100).setCredits(req.getOpen().getCredits())
                  .setAckFailuresOnly(true)).build());
              out = responses;
            }
            case FINISH -> {
              finishes.add(req.getFinish());
              if (finishAnswer == FinishAnswer.REFUSED_AS_STALE) {
                send(responses, WorkResponse.newBuilder().setFinishAck(WorkResponse.FinishAck.newBuilder()
                    .setKey(req.getFinish().getKey()).setToken(req.getFinish().getToken())
                    .setCode(Status.Code.FAILED_PRECONDITION.value()).setMessage("stale lease token")).build());
              }
            }
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
  }
}
