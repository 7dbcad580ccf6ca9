package io.github.workqueuesidecar.examples.users;

import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import io.github.workqueuesidecar.client.ReadOptions;
import io.github.workqueuesidecar.client.RunOptions;
import io.github.workqueuesidecar.client.Worker;
import io.github.workqueuesidecar.client.WorkqueueClient;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The example against a real control plane and sidecar (deploy/overlays/users/config.yaml), the
 * reconciler running in this JVM: Users get owned Namespaces, a display name change moves the label,
 * a deleted User's Namespace is deleted and the User disappears. Skipped without WQS_KUBECONFIG.
 */
class UsersEndToEndTest {
  private static final Pattern LISTENING = Pattern.compile("listening transport=\"tcp\" address=(\\S+)");
  /** Cache reads wait for the informers' initial lists. */
  private static final ReadOptions SYNCED = ReadOptions.now().waitFor(Duration.ofSeconds(30));
  private static final Path REPO = Paths.get(System.getProperty("wqs.repo", "../../../..")).toAbsolutePath().normalize();

  @Test
  void usersGetOwnedNamespaces() throws Exception {
    String kubeconfig = System.getenv("WQS_KUBECONFIG");
    Assumptions.assumeTrue(kubeconfig != null && !kubeconfig.isEmpty(), "needs the local control plane (WQS_KUBECONFIG)");
    String bin = System.getenv("WQS_SIDECAR_BIN");
    Assumptions.assumeTrue(bin != null && !bin.isEmpty(), "needs WQS_SIDECAR_BIN (hack/test-java sets it)");
    kubectl("apply", "-f", REPO.resolve("deploy/crds/user.yaml").toString());
    kubectl("wait", "--for", "condition=established", "--timeout=60s", "crd/users.example.com");

    ProcessBuilder pb = new ProcessBuilder(bin, "--tcp", "127.0.0.1:0", "--admin", "off", "--kubeconfig", kubeconfig,
        "--config", REPO.resolve("deploy/overlays/users/config.yaml").toString()).redirectOutput(ProcessBuilder.Redirect.DISCARD);
    pb.environment().keySet().removeIf(k -> k.startsWith("WQS_") || k.startsWith("POD_"));
    Process sidecarProcess = pb.start();
    String address = awaitListening(sidecarProcess);
    String id = "jt" + (System.nanoTime() % 1_000_000);
    List<String> names = List.of(id + "-a", id + "-b", id + "-c");
    try (WorkqueueClient client = WorkqueueClient.connect(address);
        Worker worker = client.queue("users").start(new UsersReconciler(client), RunOptions.concurrency(4))) {
      try {
        for (String name : names) {
          client.objects().apply(UsersReconciler.USER, "", name, user(name, "Display " + name), UsersReconciler.FIELD_MANAGER, true);
        }
        for (String name : names) {
          eventually("namespace of " + name, () -> label(client, name).equals(Optional.of("Display-" + name)));
        }
        client.objects().mergePatch(UsersReconciler.USER, "", names.get(0), Map.of("spec", Map.of("display_name", "Renamed")));
        eventually("the label moved", () -> label(client, names.get(0)).equals(Optional.of("Renamed")));

        client.objects().delete(UsersReconciler.USER, "", names.get(1));
        eventually("the deleted user gone", () -> client.cache().get("users", "", names.get(1), JsonNode.class, SYNCED).isEmpty());
        // Without a namespace controller the Namespace stays Terminating: deleted, not gone.
        eventually("the deleted user's namespace deleted", () -> client.cache()
            .get("namespaces", "", UsersReconciler.namespaceFor(names.get(1)), JsonNode.class, SYNCED)
            .map(ns -> ns.path("metadata").hasNonNull("deletionTimestamp"))
            .orElse(true));
      } finally {
        for (String name : names) {
          try {
            client.objects().delete(UsersReconciler.USER, "", name);
          } catch (RuntimeException ignored) {
            // gone
          }
        }
        eventually("every test user gone", () -> names.stream().allMatch(n -> client.cache().get("users", "", n, JsonNode.class, SYNCED).isEmpty()));
      }
    } finally {
      sidecarProcess.destroy();
      sidecarProcess.waitFor(10, TimeUnit.SECONDS);
    }
  }

  private static Map<String, Object> user(String name, String displayName) {
    return Map.of("apiVersion", "example.com/v1", "kind", "User", "metadata", Map.of("name", name), "spec", Map.of("display_name", displayName));
  }

  /** The display-name label of the User's Namespace, if the cache has one owned by the User. */
  private static Optional<String> label(WorkqueueClient client, String user) {
    return client.cache().get("namespaces", "", UsersReconciler.namespaceFor(user), JsonNode.class, SYNCED)
        .map(ns -> ns.path("metadata").path("labels").path(UsersReconciler.DISPLAY_NAME_LABEL).asText(""));
  }

  private static String awaitListening(Process p) throws InterruptedException {
    CountDownLatch ready = new CountDownLatch(1);
    String[] address = new String[1];
    Thread pump = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getErrorStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = r.readLine()) != null) {
          Matcher m = LISTENING.matcher(line);
          if (ready.getCount() > 0 && m.find()) {
            address[0] = m.group(1);
            ready.countDown();
          }
        }
      } catch (java.io.IOException ignored) {
        // ended
      }
    });
    pump.setDaemon(true);
    pump.start();
    if (!ready.await(60, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      fail("the sidecar did not start");
    }
    return address[0];
  }

  private static void kubectl(String... args) throws Exception {
    List<String> command = new ArrayList<>(List.of(REPO.resolve("hack/control-plane").toString(), "kubectl"));
    command.addAll(List.of(args));
    Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (p.waitFor() != 0) {
      fail("kubectl " + String.join(" ", args) + ": " + out);
    }
  }

  private static void eventually(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        fail("timed out waiting for " + what);
      }
      Thread.sleep(50);
    }
  }
}
