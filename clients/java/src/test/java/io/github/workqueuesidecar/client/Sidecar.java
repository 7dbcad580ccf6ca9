package io.github.workqueuesidecar.client;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** The real sidecar binary, started on 127.0.0.1:0 (or a given address) for one test. */
final class Sidecar implements AutoCloseable {
  private static final Pattern LISTENING = Pattern.compile("listening transport=\"(tcp|unix)\" (?:address|path)=(\\S+)");
  /** How long the sidecar gets to print its listening line. */
  private static final long START_TIMEOUT_SECONDS = 30;
  private static Path binary;

  final Process process;
  private final List<String> lines = new ArrayList<>();
  private final CountDownLatch listening = new CountDownLatch(1);
  private volatile String transport = "";
  private volatile String address = "";

  private Sidecar(Process process) {
    this.process = process;
  }

  /** A standalone sidecar: one queue "default" with client-go's defaults. */
  static Sidecar start() {
    return start(null);
  }

  /** A sidecar with this YAML config (null: none). */
  static Sidecar start(String config, String... args) {
    return startOn("127.0.0.1:0", config, args);
  }

  static Sidecar startOn(String tcp, String config, String... args) {
    // --allow-shutdown-rpc: the suite tests ShutDown, which a sidecar refuses unless allowed.
    List<String> command = new ArrayList<>(List.of(binary().toString(), "--tcp", tcp, "--admin", "off", "--log-format", "text", "--log", "info,workqueue_sidecar=debug", "--allow-shutdown-rpc"));
    try {
      if (config != null) {
        Path file = Files.createTempFile("wqs-java-test-", ".yaml");
        file.toFile().deleteOnExit();
        Files.writeString(file, config);
        command.add("--config");
        command.add(file.toString());
      }
      command.addAll(List.of(args));
      ProcessBuilder pb = new ProcessBuilder(command).redirectOutput(ProcessBuilder.Redirect.DISCARD);
      // The sidecar reads WQS_* (and POD_*) variables as flag defaults; none may leak in.
      pb.environment().keySet().removeIf(k -> k.startsWith("WQS_") || k.startsWith("POD_") || k.equals("KUBECONFIG"));
      Sidecar s = new Sidecar(pb.start());
      Thread pump = new Thread(s::pump, "sidecar-log-" + s.process.pid());
      pump.setDaemon(true);
      pump.start();
      if (!s.listening.await(START_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
        s.process.destroyForcibly();
        fail("the sidecar did not start (" + command + "):\n" + s.log());
      }
      return s;
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** A sidecar with this config and extra args whose informers talk to $WQS_KUBECONFIG. */
  static Sidecar startWithKubeconfig(String config, String kubeconfig) {
    return start(config, "--kubeconfig", kubeconfig);
  }

  /** $WQS_SIDECAR_BIN, else built with cargo at the repository root (a no-op when current). */
  static synchronized Path binary() {
    if (binary != null) {
      return binary;
    }
    String given = System.getenv("WQS_SIDECAR_BIN");
    if (given != null && !given.isEmpty()) {
      binary = Paths.get(given);
      if (!Files.isExecutable(binary)) {
        fail("WQS_SIDECAR_BIN=" + given + " is not an executable file");
      }
      return binary;
    }
    Path repo = Paths.get(System.getProperty("wqs.repo", "../..")).toAbsolutePath().normalize();
    String cache = System.getenv().getOrDefault("WQS_CACHE_DIR", System.getProperty("user.home") + "/.cache/workqueue-sidecar");
    String target = System.getenv().getOrDefault("CARGO_TARGET_DIR", cache + "/target");
    try {
      ProcessBuilder pb = new ProcessBuilder("cargo", "build", "--locked", "--bin", "workqueue-sidecar").directory(repo.toFile()).inheritIO();
      pb.environment().put("CARGO_TARGET_DIR", target);
      int status = pb.start().waitFor();
      if (status != 0) {
        fail("cargo build --bin workqueue-sidecar failed with status " + status);
      }
    } catch (IOException e) {
      fail("cargo build: " + e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      fail("interrupted");
    }
    binary = Paths.get(target, "debug", "workqueue-sidecar");
    return binary;
  }

  /** "127.0.0.1:PORT" or the unix socket's path. */
  String address() {
    return address;
  }

  String target() {
    return transport.equals("unix") ? "unix://" + address : address;
  }

  synchronized String log() {
    return String.join("\n", lines);
  }

  /** Sends a signal by name (STOP, CONT, TERM, KILL). */
  void signal(String name) {
    try {
      int status = new ProcessBuilder("kill", "-" + name, Long.toString(process.pid())).inheritIO().start().waitFor();
      if (status != 0) {
        fail("kill -" + name + " failed");
      }
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** SIGKILL, and wait for the process to end. */
  void kill() throws InterruptedException {
    process.destroyForcibly();
    process.waitFor(10, TimeUnit.SECONDS);
  }

  /** SIGTERM, then SIGKILL if it has not exited within 10 s. */
  @Override
  public void close() {
    if (process.isAlive()) {
      signal("CONT");
      process.destroy();
      try {
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
          process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        process.destroyForcibly();
        Thread.currentThread().interrupt();
      }
    }
  }

  private void pump() {
    try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getErrorStream(), StandardCharsets.UTF_8))) {
      String line;
      while ((line = r.readLine()) != null) {
        synchronized (this) {
          lines.add(line);
        }
        Matcher m = LISTENING.matcher(line);
        if (listening.getCount() > 0 && m.find()) {
          transport = m.group(1);
          address = m.group(2);
          listening.countDown();
        }
      }
    } catch (IOException ignored) {
      // the process ended
    }
  }
}
