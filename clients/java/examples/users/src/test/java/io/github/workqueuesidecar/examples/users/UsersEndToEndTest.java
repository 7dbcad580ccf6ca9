package io.github.workqueuesidecar.examples.users;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.github.workqueuesidecar.client.CancellationSignal;
import io.github.workqueuesidecar.client.ErrorDetails;
import io.github.workqueuesidecar.client.LeaseRef;
import io.github.workqueuesidecar.client.ListOptions;
import io.github.workqueuesidecar.client.ReadOptions;
import io.github.workqueuesidecar.client.Request;
import io.github.workqueuesidecar.client.ResourceType;
import io.github.workqueuesidecar.client.StaleLeaseException;
import io.github.workqueuesidecar.client.WorkqueueClient;
import io.github.workqueuesidecar.client.WorkqueueException;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.io.TempDir;

/**
 * The example end to end: the real control plane (hack/control-plane), the real sidecar binary with
 * the users overlay's config (deploy/overlays/users/config.yaml, which declares the finalizer) and
 * the example run as its own JVM, as the Go, Python and TypeScript examples' tests run theirs. What
 * the test checks it reads from the API server (kubectl); the Users are written through the
 * sidecar. Skipped without WQS_KUBECONFIG.
 *
 * <p>The control plane runs no kube-controller-manager, so a deleted Namespace stays Terminating:
 * "deleted" here means it has a deletionTimestamp.
 */
class UsersEndToEndTest {
  private static final Pattern LISTENING = Pattern.compile("listening transport=\"tcp\" address=(\\S+)");
  private static final Path REPO = Paths.get(System.getProperty("wqs.repo", "../../../..")).toAbsolutePath().normalize();
  private static final ResourceType USER = new ResourceType("example.com/v1", "User");
  private static final String FINALIZER = "example.com/namespace";
  private static final ObjectMapper JSON = new ObjectMapper();

  private static String kubeconfig;
  private static String sidecarBin;

  @TempDir Path tmp;
  private Process sidecar;
  private WorkqueueClient client;
  private String prefix;
  private final List<Process> examples = new ArrayList<>();

  @BeforeAll
  static void controlPlane() throws Exception {
    kubeconfig = System.getenv("WQS_KUBECONFIG");
    sidecarBin = System.getenv("WQS_SIDECAR_BIN");
    if (available(kubeconfig) && available(sidecarBin)) {
      kubectl("apply", "-f", REPO.resolve("deploy/crds/user.yaml").toString());
      kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/users.example.com");
    }
  }

  private static boolean available(String setting) {
    return setting != null && !setting.isEmpty();
  }

  @BeforeEach
  void startSidecar(TestInfo test) throws Exception {
    // Here rather than in @BeforeAll, so that each test is reported skipped.
    assumeTrue(available(kubeconfig), "needs the local control plane: hack/control-plane up; eval \"$(hack/control-plane env)\"");
    assumeTrue(available(sidecarBin), "needs WQS_SIDECAR_BIN (hack/test-java sets it)");
    prefix = "jv" + Long.toString(System.nanoTime() % 1_000_000, 36) + test.getTestMethod().orElseThrow().getName().substring(0, 4).toLowerCase(Locale.ROOT);
    // The users config, and the writes this test makes through the sidecar outside any lease
    // (its Users, and edits of their Namespaces), added to the config's `writes:` list, its last section.
    Path config = tmp.resolve("config.yaml");
    Files.writeString(config, Files.readString(REPO.resolve("deploy/overlays/users/config.yaml"))
        + "  - { group: example.com, kind: User, lease: optional }\n"
        + "  - { kind: Namespace, verbs: [patch, delete], lease: optional }\n");
    ProcessBuilder pb = new ProcessBuilder(sidecarBin, "--tcp", "127.0.0.1:0", "--admin", "off", "--kubeconfig", kubeconfig,
        "--config", config.toString()).redirectOutput(ProcessBuilder.Redirect.DISCARD);
    pb.environment().keySet().removeIf(k -> k.startsWith("WQS_") || k.startsWith("POD_"));
    sidecar = pb.start();
    client = WorkqueueClient.connect(awaitListening(sidecar, tmp.resolve("sidecar.log")));
    client.cache().listObjects("users", ListOptions.all().read(ReadOptions.now().waitFor(Duration.ofSeconds(30)))); // the informers synced
  }

  @AfterEach
  void cleanUp() throws Exception {
    if (client == null) {
      return; // skipped
    }
    for (Process p : examples) {
      p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }
    // The Users go without a worker: delete them and drop the finalizer. Their Namespaces stay
    // Terminating (no namespace controller), named after this test's prefix.
    for (String name : apiServer().users.keySet()) {
      if (name.startsWith(prefix)) {
        quietly(() -> client.objects().delete(USER, "", name));
        quietly(() -> client.objects().mergePatch(USER, "", name, Map.of("metadata", Map.of("finalizers", List.of()))));
        quietly(() -> client.objects().delete(Users.NAMESPACE, "", "user-" + name));
      }
    }
    client.close();
    sidecar.destroy();
    sidecar.waitFor(10, TimeUnit.SECONDS);
    try (var logs = Files.list(tmp)) {
      for (Path log : logs.sorted().toList()) {
        System.out.println("--- " + log.getFileName() + "\n" + Files.readString(log));
      }
    }
  }

  @Test
  void usersGetOwnedNamespacesThatFollowThem() throws Exception {
    Process worker = startExample(4);
    List<String> names = names(20);
    for (int i = 0; i < names.size(); i++) {
      createUser(names.get(i), "User " + i);
    }
    eventually("20 owned, labelled Namespaces", () -> allReconciled(names, i -> "User " + i));

    // A new display name: the Namespace's label and annotation follow.
    String renamed = names.get(3);
    client.objects().mergePatch(USER, "", renamed, Map.of("spec", Map.of("display_name", "Ada Lovelace (renamed)")));
    eventually("the label to follow the display name", () -> apiServer().reconciled(renamed, "Ada Lovelace (renamed)"));

    // An edited Namespace: the owner trigger queues its User, which repairs it.
    String edited = names.get(4);
    client.objects().mergePatch(Users.NAMESPACE, "", "user-" + edited, Map.of("metadata", Map.of(
        "labels", Map.of(Users.DISPLAY_NAME, "tampered"), "annotations", Map.of(Users.DISPLAY_NAME, "tampered"))));
    eventually("the edited Namespace repaired", () -> apiServer().reconciled(edited, "User 4"));

    // A deleted User: its Namespace is deleted, then the sidecar removes its finalizer, so it goes.
    String deleted = names.get(5);
    client.objects().delete(USER, "", deleted);
    eventually("the deleted User to disappear", () -> !apiServer().users.containsKey(deleted));
    assertTrue(apiServer().namespaceDeleted(deleted), "the deleted User's Namespace is not being deleted");

    // The Namespace of a deleted User is not made again, and the others stay.
    Thread.sleep(1000);
    ApiServer now = apiServer();
    assertTrue(now.namespaceDeleted(deleted), "the deleted User's Namespace was made again");
    for (int i = 0; i < names.size(); i++) {
      String name = names.get(i);
      if (!List.of(renamed, deleted).contains(name)) {
        assertTrue(now.reconciled(name, "User " + i), name + " is not reconciled any more");
      }
    }
    assertTrue(worker.isAlive(), "the example exited");
    assertNoStaleCreates();

    // SIGTERM: the example stops gracefully and exits.
    worker.destroy();
    assertTrue(worker.waitFor(30, TimeUnit.SECONDS), "the example did not exit within 30 s of SIGTERM");
  }

  /**
   * The worker's own writes race its next reconciles: Users renamed every few milliseconds from
   * their creation on, so each reconcile's write is followed at once by another lease of the same
   * key (the rename, the sidecar's finalizer, the Namespace's own event). Every Namespace ends with
   * its User's last display name, and no reconcile acts on a cache older than its own last write
   * (it would create the Namespace again and fail with AlreadyExists; the stale-read guard makes that
   * none). It cannot show the guard is needed (a local API server's watch nearly always beats the
   * next lease, and a sidecar with the guard off passed it too): tests/k8s_stale_read_guard.rs is
   * the test that fails without it.
   */
  @Test
  void theWorkersOwnWritesAreNeverReadStale() throws Exception {
    int users = 10;
    int renames = 20;
    startExample(4);
    List<String> names = names(users);
    AtomicBoolean sampling = new AtomicBoolean(true);
    AtomicInteger settling = new AtomicInteger();
    Thread sampler = new Thread(() -> { // how often a key waited for the caches to see its writes
      while (sampling.get()) {
        if (client.queue("users").len().settling() > 0) {
          settling.incrementAndGet();
        }
        sleep(2);
      }
    });
    sampler.start();
    ExecutorService pool = Executors.newFixedThreadPool(users);
    try {
      List<Future<?>> writers = new ArrayList<>();
      for (String name : names) {
        writers.add(pool.submit(() -> {
          createUser(name, "Name 0");
          for (int i = 1; i <= renames; i++) {
            sleep(ThreadLocalRandom.current().nextInt(15));
            client.objects().mergePatch(USER, "", name, Map.of("spec", Map.of("display_name", "Name " + i)));
          }
          return null;
        }));
      }
      for (Future<?> w : writers) {
        w.get(60, TimeUnit.SECONDS);
      }
      eventually("the last display names", () -> allReconciled(names, i -> "Name " + renames));
    } finally {
      pool.shutdownNow();
      sampling.set(false);
      sampler.join();
    }
    System.out.printf("%d Users x %d renames: a key was settling in %d samples of the queue%n", users, renames, settling.get());
    assertNoStaleCreates();
  }

  @Test
  void aKilledWorkerLeavesNoUserUnreconciled() throws Exception {
    List<String> names = names(20);
    for (int i = 0; i < names.size(); i++) {
      createUser(names.get(i), "User " + i);
    }
    Process first = startExample(1);
    eventually("the first Namespace", Duration.ofMillis(10), () -> names.stream().anyMatch(n ->
        client.cache().get("namespaces", "", "user-" + n, JsonNode.class, ReadOptions.now()).isPresent()));
    first.destroyForcibly(); // SIGKILL, mid-run: its held lease goes back to the queue when the stream breaks
    assertTrue(first.waitFor(10, TimeUnit.SECONDS));
    ApiServer atKill = apiServer();
    System.out.printf("killed the worker with %d of %d Namespaces made%n", names.stream().filter(n -> atKill.namespaces.containsKey("user-" + n)).count(), names.size());

    startExample(4);
    eventually("every User reconciled", () -> allReconciled(names, i -> "User " + i));
    assertNoStaleCreates();
  }

  /**
   * Every write of a reconcile names its lease: a reconcile whose lease is not current (it ended, or
   * never was) is refused with StaleLeaseException and writes nothing. Here a deleting request under
   * a token the sidecar never granted leaves the Namespace in place.
   */
  @Test
  void aReconcileWhoseLeaseEndedWritesNothing() throws Exception {
    String name = names(1).get(0);
    startExample(1);
    createUser(name, "Ada");
    eventually("the User reconciled", () -> apiServer().reconciled(name, "Ada"));
    Request stale = new Request("users", name, 0, 0, "", List.of(), null, Optional.empty(), CancellationSignal.never(),
        new LeaseRef("users", name, 0xdead_beefL), true, Optional.of(Instant.now()));
    StaleLeaseException refused = assertThrows(StaleLeaseException.class, () -> Users.reconcile(client, stale));
    assertEquals(Optional.of(ErrorDetails.STALE_LEASE), refused.reason());
    assertTrue(apiServer().reconciled(name, "Ada"), "the Namespace was deleted under a stale lease");
  }

  // ---- helpers ----

  private List<String> names(int n) {
    return IntStream.range(0, n).mapToObj(i -> String.format("%s-%02d", prefix, i)).toList();
  }

  private void createUser(String name, String displayName) {
    client.objects().create(USER, "", Map.of("apiVersion", "example.com/v1", "kind", "User", "metadata", Map.of("name", name), "spec", Map.of("display_name", displayName)));
  }

  private boolean allReconciled(List<String> names, java.util.function.IntFunction<String> displayName) {
    ApiServer now = apiServer();
    return IntStream.range(0, names.size()).allMatch(i -> now.reconciled(names.get(i), displayName.apply(i)));
  }

  /** The example as its own JVM on this test's classpath, its output in tmp/example-N.log. */
  private Process startExample(int concurrency) throws IOException {
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    File log = tmp.resolve("example-" + examples.size() + ".log").toFile();
    Process p = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), Users.class.getName(),
        "--sidecar", client.target(), "--concurrency", Integer.toString(concurrency))
        .redirectErrorStream(true).redirectOutput(log).start();
    examples.add(p);
    return p;
  }

  /** Creates that failed with AlreadyExists in the examples' logs: each a reconcile that read a cache older than its own last write. */
  private void assertNoStaleCreates() throws IOException {
    int n = 0;
    try (var logs = Files.list(tmp)) {
      for (Path log : logs.filter(p -> p.getFileName().toString().startsWith("example-")).toList()) {
        n += Files.readString(log).toLowerCase(Locale.ROOT).split("already exists", -1).length - 1;
      }
    }
    assertEquals(0, n, "creates that failed with AlreadyExists: a reconcile read a cache older than its own last write");
  }

  /** The Users and Namespaces as the API server has them now, by name. */
  private record ApiServer(Map<String, JsonNode> users, Map<String, JsonNode> namespaces) {
    /** The User has the finalizer, and its Namespace is owned by it and carries its display name. */
    boolean reconciled(String user, String displayName) {
      JsonNode u = users.get(user);
      JsonNode ns = namespaces.get("user-" + user);
      if (u == null || ns == null || ns.path("metadata").has("deletionTimestamp")) {
        return false;
      }
      List<String> finalizers = new ArrayList<>();
      u.path("metadata").path("finalizers").forEach(f -> finalizers.add(f.asText()));
      List<String> controllers = new ArrayList<>();
      ns.path("metadata").path("ownerReferences").forEach(o -> {
        if (o.path("controller").asBoolean()) {
          controllers.add(o.path("kind").asText() + "/" + o.path("uid").asText());
        }
      });
      JsonNode labels = ns.path("metadata").path("labels");
      return finalizers.contains(FINALIZER)
          && controllers.equals(List.of("User/" + u.path("metadata").path("uid").asText()))
          && labels.path("app.kubernetes.io/managed-by").asText().equals("users-reconciler")
          && labels.path("example.com/user").asText().equals(user)
          && labels.path(Users.DISPLAY_NAME).asText().equals(Users.labelValue(displayName))
          && ns.path("metadata").path("annotations").path(Users.DISPLAY_NAME).asText().equals(displayName);
    }

    /** The User's Namespace is gone or being deleted. */
    boolean namespaceDeleted(String user) {
      JsonNode ns = namespaces.get("user-" + user);
      return ns == null || ns.path("metadata").has("deletionTimestamp");
    }
  }

  private static ApiServer apiServer() {
    try {
      JsonNode list = JSON.readTree(kubectl("get", "users.example.com,namespaces", "-o", "json"));
      Map<String, JsonNode> users = new HashMap<>();
      Map<String, JsonNode> namespaces = new HashMap<>();
      for (JsonNode item : list.path("items")) {
        (item.path("kind").asText().equals("User") ? users : namespaces).put(item.path("metadata").path("name").asText(), item);
      }
      return new ApiServer(users, namespaces);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String kubectl(String... args) {
    List<String> command = new ArrayList<>(List.of(REPO.resolve("hack/control-plane").toString(), "kubectl", "--kubeconfig", kubeconfig));
    command.addAll(List.of(args));
    try {
      Process p = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (p.waitFor() != 0) {
        fail("kubectl " + String.join(" ", args) + " failed");
      }
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** The sidecar's address from its "listening" line; its stderr copied to {@code log}. */
  private static String awaitListening(Process p, Path log) throws Exception {
    CountDownLatch ready = new CountDownLatch(1);
    String[] address = new String[1];
    Thread pump = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getErrorStream(), StandardCharsets.UTF_8));
          PrintWriter out = new PrintWriter(Files.newBufferedWriter(log), true)) {
        for (String line; (line = r.readLine()) != null; ) {
          out.println(line);
          Matcher m = LISTENING.matcher(line);
          if (ready.getCount() > 0 && m.find()) {
            address[0] = m.group(1);
            ready.countDown();
          }
        }
      } catch (IOException ended) {
        // the process ended
      }
    });
    pump.setDaemon(true);
    pump.start();
    if (!ready.await(60, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      fail("the sidecar did not start; its log: " + log);
    }
    return address[0];
  }

  private static void eventually(String what, BooleanSupplier condition) throws InterruptedException {
    eventually(what, Duration.ofMillis(100), condition);
  }

  private static void eventually(String what, Duration interval, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        fail("timed out after 60 s waiting for " + what);
      }
      Thread.sleep(interval.toMillis());
    }
  }

  private static void quietly(Runnable write) {
    try {
      write.run();
    } catch (WorkqueueException ignored) {
      // already gone
    }
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
