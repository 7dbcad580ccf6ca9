package io.github.workqueuesidecar.examples.users;

import com.fasterxml.jackson.annotation.JsonProperty;
import io.github.workqueuesidecar.client.CachedObject;
import io.github.workqueuesidecar.client.ClientOptions;
import io.github.workqueuesidecar.client.NotFoundException;
import io.github.workqueuesidecar.client.ObjectWrites;
import io.github.workqueuesidecar.client.OwnerReference;
import io.github.workqueuesidecar.client.Request;
import io.github.workqueuesidecar.client.ResourceType;
import io.github.workqueuesidecar.client.Result;
import io.github.workqueuesidecar.client.RunOptions;
import io.github.workqueuesidecar.client.WorkqueueClient;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Seed 001's controller on workqueue-sidecar: every User (example.com/v1, cluster-scoped) gets a
 * Namespace {@code user-<name>} that it owns (controller ownerReference), labelled with its display
 * name; a User being deleted has its Namespace deleted before it goes. No Kubernetes client: reads
 * come from the sidecar's caches, writes go through the sidecar under the reconcile's lease.
 *
 * <p>The sidecar (deploy/overlays/users/config.yaml) keeps the User's finalizer
 * (queues.users.finalizer): it adds it before a live User's lease goes out and removes it when a
 * {@code deleting} lease ends in success. It hands a User's lease out only once its caches have seen
 * the writes made under the previous one, so a reconcile never acts on a state older than its own
 * last write.
 *
 * <pre>
 * java ... Users                                     # in a pod (deploy/overlays/users)
 * java ... Users --sidecar 127.0.0.1:50051 --concurrency 2
 * </pre>
 */
public final class Users {
  static final ResourceType NAMESPACE = new ResourceType("v1", "Namespace");
  static final String DISPLAY_NAME = "example.com/display-name"; // a label (sanitized) and an annotation (verbatim)

  record User(Spec spec) {
    record Spec(@JsonProperty("display_name") String displayName) {}
  }

  record Namespace(Meta metadata) {}

  record Meta(Map<String, String> labels, Map<String, String> annotations, List<OwnerReference> ownerReferences) {
    boolean covers(Map<String, String> wantLabels, Map<String, String> wantAnnotations, List<OwnerReference> owners) {
      return labels != null && labels.entrySet().containsAll(wantLabels.entrySet())
          && annotations != null && annotations.entrySet().containsAll(wantAnnotations.entrySet())
          && owners.equals(ownerReferences);
    }
  }

  private Users() {}

  /** A valid label value: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends. */
  static String labelValue(String text) {
    String s = text.replaceAll("[^A-Za-z0-9._-]", "-");
    return s.substring(0, Math.min(s.length(), 63)).replaceAll("^[-_.]+|[-_.]+$", "");
  }

  /** Makes the User's Namespace match the User, or deletes it when the User is being deleted or gone. Throwing retries. */
  static Result reconcile(WorkqueueClient client, Request req) {
    ObjectWrites writes = client.objects().underLease(req.lease());
    String name = "user-" + req.name();
    Optional<CachedObject> user = req.object().filter(o -> !o.deleted());
    if (req.deleting() || user.isEmpty()) {
      try { // deleting: success lets the sidecar remove the User's finalizer
        writes.delete(NAMESPACE, "", name);
      } catch (NotFoundException alreadyGone) {
        // nothing to clean up
      }
      return Result.done();
    }
    String displayName = user.get().as(User.class).spec().displayName();
    var labels = Map.of("app.kubernetes.io/managed-by", "users-reconciler", "example.com/user", req.name(), DISPLAY_NAME, labelValue(displayName));
    var annotations = Map.of(DISPLAY_NAME, displayName);
    var owners = List.of(user.get().controllerRef());
    var want = Map.of("apiVersion", "v1", "kind", "Namespace",
        "metadata", Map.of("name", name, "labels", labels, "annotations", annotations, "ownerReferences", owners));
    Optional<Namespace> have = client.cache().get("namespaces", "", name, Namespace.class);
    if (have.isEmpty()) {
      // Create, not apply: were the cache behind our own last write, this would fail with
      // AlreadyExists (the end-to-end test counts them: none).
      writes.create(NAMESPACE, "", want);
    } else if (!have.get().metadata().covers(labels, annotations, owners)) {
      writes.apply(NAMESPACE, "", name, want, "", true); // edited, or owned by another
    }
    return Result.done();
  }

  public static void main(String[] args) throws InterruptedException {
    // The same variable and default as the other examples: what deploy/base sets.
    String target = System.getenv().getOrDefault("WORKQUEUE_SIDECAR_TARGET", "unix:///run/workqueue-sidecar/grpc.sock");
    int concurrency = 4;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--sidecar" -> target = args[++i];
        case "--concurrency" -> concurrency = Integer.parseInt(args[++i]);
        default -> throw new IllegalArgumentException("usage: Users [--sidecar unix:///path|host:port] [--concurrency 4]");
      }
    }
    try (var client = WorkqueueClient.connect(target, ClientOptions.defaults().workerName("users-java/" + ProcessHandle.current().pid()))) {
      client.queue("users").start((req, signal) -> reconcile(client, req), RunOptions.concurrency(concurrency).includeObject()).stopOnShutdown().await();
    }
  }
}
