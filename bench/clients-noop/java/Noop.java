// bench/clients' Java worker: the client's queue.start with a reconciler that
// returns success at once, until N reconciles have returned.
//
//   java -cp CLASSPATH Noop.java TARGET QUEUE N CONCURRENCY
//
// Prints one line: result reconciles=N elapsed_s=... cpu_s=... rss_kib=...,
// from the first reconcile's start to the N-th reconcile's return (CPU time
// of this process over the same span, VmRSS then).
import com.sun.management.OperatingSystemMXBean;
import io.github.workqueuesidecar.client.Reconciler;
import io.github.workqueuesidecar.client.Result;
import io.github.workqueuesidecar.client.RunOptions;
import io.github.workqueuesidecar.client.Worker;
import io.github.workqueuesidecar.client.WorkqueueClient;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

public final class Noop {
  static volatile long t0, t1, c0, c1, rss;

  public static void main(String[] args) throws Exception {
    int n = Integer.parseInt(args[2]);
    var started = new AtomicBoolean();
    var done = new AtomicInteger();
    var stop = new CountDownLatch(1);
    Reconciler noop = (req, signal) -> {
      if (started.compareAndSet(false, true)) {
        t0 = System.nanoTime();
        c0 = cpu();
      }
      if (done.incrementAndGet() == n) {
        t1 = System.nanoTime();
        c1 = cpu();
        rss = rssKiB();
        stop.countDown();
      }
      return Result.done();
    };
    try (WorkqueueClient client = WorkqueueClient.connect(args[0])) {
      Worker worker = client.queue(args[1]).start(noop, RunOptions.concurrency(Integer.parseInt(args[3])));
      stop.await();
      worker.close(); // a graceful stop: the results still running are sent
    }
    System.out.printf("result reconciles=%d elapsed_s=%.6f cpu_s=%.6f rss_kib=%d%n",
        done.get(), (t1 - t0) / 1e9, (c1 - c0) / 1e9, rss);
  }

  /** This process's CPU time so far (user + system), nanoseconds. */
  static long cpu() {
    return ManagementFactory.getPlatformMXBean(OperatingSystemMXBean.class).getProcessCpuTime();
  }

  /** VmRSS from /proc/self/status. */
  static long rssKiB() {
    try {
      return Files.readAllLines(Path.of("/proc/self/status")).stream()
          .filter(line -> line.startsWith("VmRSS:"))
          .mapToLong(line -> Long.parseLong(line.replaceAll("\\D", "")))
          .findFirst().orElse(0);
    } catch (java.io.IOException e) {
      return 0;
    }
  }
}
