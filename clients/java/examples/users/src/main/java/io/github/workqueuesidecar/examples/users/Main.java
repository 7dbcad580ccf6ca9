package io.github.workqueuesidecar.examples.users;

import io.github.workqueuesidecar.client.ClientOptions;
import io.github.workqueuesidecar.client.RunOptions;
import io.github.workqueuesidecar.client.Worker;
import io.github.workqueuesidecar.client.WorkqueueClient;
import java.lang.System.Logger.Level;

/**
 * The example controller of workqueue-sidecar (seed 001): a Namespace for every User.
 *
 * <pre>
 * java ... Main                                          # in a pod (deploy/overlays/users)
 * java ... Main --sidecar 127.0.0.1:50051 --concurrency 2
 * </pre>
 *
 * The sidecar (config: deploy/overlays/users/config.yaml) watches Users and the Namespaces made for
 * them and queues User names on the queue "users"; this worker reads through its cache and writes
 * through it. SIGTERM stops it gracefully.
 */
public final class Main {
  private static final System.Logger LOG = System.getLogger("users");

  private Main() {}

  public static void main(String[] args) throws InterruptedException {
    // The same variable and default as the Go and Python examples: what deploy/base sets.
    String target = System.getenv().getOrDefault("WORKQUEUE_SIDECAR_TARGET", "unix:///run/workqueue-sidecar/grpc.sock");
    String queue = "users";
    int concurrency = 4;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--sidecar" -> target = args[++i];
        case "--queue" -> queue = args[++i];
        case "--concurrency" -> concurrency = Integer.parseInt(args[++i]);
        default -> {
          System.err.println("usage: Main [--sidecar unix:///path|host:port] [--queue users] [--concurrency 4]");
          System.exit(2);
        }
      }
    }
    try (WorkqueueClient sidecar = WorkqueueClient.connect(target, ClientOptions.defaults().workerName("users-java/" + ProcessHandle.current().pid()))) {
      LOG.log(Level.INFO, "reconciling queue {0} from {1}, {2} at a time", queue, target, concurrency);
      Worker worker = sidecar.queue(queue).start(new UsersReconciler(sidecar), RunOptions.concurrency(concurrency)).stopOnShutdown();
      worker.await();
    }
    LOG.log(Level.INFO, "stopped");
  }
}
