package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** A worker process stopped by SIGTERM under stopOnShutdown(): its stop completes and is logged. */
class ShutdownLogTest {
  @Test
  @DisplayName("C7 SIGTERM under stopOnShutdown(): the running reconcile's result counts, and the stop's log lines survive java.util.logging's reset")
  void sigtermStopIsLogged() throws Exception {
    Path dir = Files.createTempDirectory("wqs-java-shutdown");
    Path out = dir.resolve("stdout");
    Path err = dir.resolve("stderr");
    try (Sidecar sidecar = Sidecar.start(); WorkqueueClient client = WorkqueueClient.connect(sidecar.target())) {
      Queue q = client.queue("default");
      q.add("ns/a");
      String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
      String classpath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
      Process worker = new ProcessBuilder(List.of(java, "-cp", classpath, StopOnShutdownMain.class.getName(), sidecar.target()))
          .redirectOutput(out.toFile())
          .redirectError(err.toFile())
          .start();
      try {
        eventually(Duration.ofSeconds(60), "the worker process to reconcile", () -> read(out).contains("reconciling ns/a"));
        worker.destroy(); // SIGTERM
        assertTrue(worker.waitFor(60, TimeUnit.SECONDS), "the worker process did not exit after SIGTERM");
      } finally {
        worker.destroyForcibly();
      }
      // The stop waited for the reconcile and its result was applied.
      assertEquals(KeyStatus.State.ABSENT, q.keyState("ns/a").state(), read(err));
      String log = read(err);
      assertTrue(log.contains("stopping work on queue default"), log);
      assertTrue(log.contains("worker of queue default stopped"), log);
      // Records name the class that logged, not the library's logger.
      assertTrue(log.contains("io.github.workqueuesidecar.client.Session onOpened"), log);
      assertFalse(log.contains("ClientLog"), log);
    }
  }

  private static String read(Path p) {
    try {
      return Files.readString(p);
    } catch (java.io.IOException e) {
      return "";
    }
  }
}
