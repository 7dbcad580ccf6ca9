package io.github.workqueuesidecar.client;

/**
 * A worker process for {@link ShutdownLogTest}: works on the queue "default" of the sidecar at
 * args[0] with {@link Worker#stopOnShutdown()} and java.util.logging as it comes with the JDK. Each
 * reconcile prints "reconciling KEY" to stdout and takes a second, so a SIGTERM meanwhile has a
 * stop to wait for.
 */
public final class StopOnShutdownMain {
  private StopOnShutdownMain() {}

  public static void main(String[] args) throws InterruptedException {
    WorkqueueClient client = WorkqueueClient.connect(args[0]);
    Reconciler reconcile = (req, signal) -> {
      System.out.println("reconciling " + req.key());
      System.out.flush();
      Thread.sleep(1_000);
      return Result.done();
    };
    client.queue("default").start(reconcile, RunOptions.concurrency(1)).stopOnShutdown().await();
  }
}
