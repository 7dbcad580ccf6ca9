package io.github.workqueuesidecar.examples.users;

import com.fasterxml.jackson.databind.JsonNode;
import io.github.workqueuesidecar.client.CancellationSignal;
import io.github.workqueuesidecar.client.NotFoundException;
import io.github.workqueuesidecar.client.ReadOptions;
import io.github.workqueuesidecar.client.Reconciler;
import io.github.workqueuesidecar.client.Request;
import io.github.workqueuesidecar.client.ResourceType;
import io.github.workqueuesidecar.client.Result;
import io.github.workqueuesidecar.client.WorkqueueClient;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Reconciles one User (example.com/v1, cluster-scoped): its finalizer and its Namespace, or its
 * deletion. Reads through the sidecar's cache, writes through its ObjectService: no Kubernetes
 * client library.
 *
 * <ul>
 *   <li>a User gets the finalizer {@value #FINALIZER} and a Namespace {@code user-<name>} that it
 *       owns (controller ownerReference), labelled with its display name;
 *   <li>a deleted User has its Namespace deleted, then its finalizer removed.
 * </ul>
 *
 * <p>Every step checks before it writes, so reconciling twice changes nothing; a write that fails
 * (a conflict with a stale cache, say) throws, and the sidecar retries the User with backoff.
 */
public final class UsersReconciler implements Reconciler {
  private static final System.Logger LOG = System.getLogger("users");

  /** Holds a User until its Namespace is deleted. */
  public static final String FINALIZER = "example.com/namespace";
  /** The field manager of this reconciler's writes, and its managed-by label value. */
  public static final String FIELD_MANAGER = "users-reconciler";
  /** Marks the Namespaces made here; the sidecar's namespaces informer selects on it. */
  public static final String MANAGED_BY_LABEL = "app.kubernetes.io/managed-by";
  /** The display name, as a label value (sanitized) and verbatim as an annotation. */
  public static final String DISPLAY_NAME_LABEL = "example.com/display-name";
  public static final String DISPLAY_NAME_ANNOTATION = "example.com/display-name";
  /** Names the owning User on its Namespace. */
  public static final String USER_LABEL = "example.com/user";

  static final ResourceType USER = new ResourceType("example.com/v1", "User");
  static final ResourceType NAMESPACE = new ResourceType("v1", "Namespace");

  private final WorkqueueClient sidecar;
  private final String usersInformer;
  private final String namespacesInformer;

  public UsersReconciler(WorkqueueClient sidecar) {
    this(sidecar, "users", "namespaces");
  }

  public UsersReconciler(WorkqueueClient sidecar, String usersInformer, String namespacesInformer) {
    this.sidecar = sidecar;
    this.usersInformer = usersInformer;
    this.namespacesInformer = namespacesInformer;
  }

  public static String namespaceFor(String user) {
    return "user-" + user;
  }

  /** A valid label value: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends. */
  public static String labelValue(String text) {
    String s = text.replaceAll("[^A-Za-z0-9._-]", "-");
    if (s.length() > 63) {
      s = s.substring(0, 63);
    }
    return s.replaceAll("^[-_.]+", "").replaceAll("[-_.]+$", "");
  }

  @Override
  public Result reconcile(Request request, CancellationSignal signal) {
    Optional<JsonNode> found = sidecar.cache().get(usersInformer, "", request.name(), JsonNode.class, ReadOptions.now().waitFor(Duration.ofSeconds(10)));
    if (found.isEmpty()) {
      return Result.done(); // gone: its finalizer saw its Namespace deleted
    }
    JsonNode user = found.get();
    JsonNode meta = user.path("metadata");
    List<String> finalizers = new ArrayList<>();
    meta.path("finalizers").forEach(f -> finalizers.add(f.asText()));
    if (meta.hasNonNull("deletionTimestamp")) {
      if (finalizers.contains(FINALIZER)) {
        finalizers.remove(FINALIZER);
        finalize(user, finalizers);
      }
      return Result.done();
    }
    if (!finalizers.contains(FINALIZER)) {
      finalizers.add(FINALIZER);
      setFinalizers(user, finalizers);
    }
    signal.throwIfCancelled(); // a lost lease: another worker may hold the User now
    applyNamespace(user);
    return Result.done();
  }

  private void finalize(JsonNode user, List<String> kept) {
    String userName = user.path("metadata").path("name").asText();
    String name = namespaceFor(userName);
    try {
      sidecar.objects().delete(NAMESPACE, "", name);
    } catch (NotFoundException alreadyGone) {
      // deleted before
    }
    setFinalizers(user, kept);
    LOG.log(Level.INFO, "user {0} deleted: namespace {1} deleted, finalizer removed", userName, name);
  }

  /**
   * Writes the finalizers on the condition that the User is still at the version read from the
   * cache (else ABORTED, a ConflictException, and the sidecar retries).
   */
  private void setFinalizers(JsonNode user, List<String> finalizers) {
    JsonNode meta = user.path("metadata");
    Map<String, Object> patch = Map.of("metadata", Map.of("resourceVersion", meta.path("resourceVersion").asText(), "finalizers", finalizers));
    sidecar.objects().mergePatch(USER, "", meta.path("name").asText(), patch);
  }

  private void applyNamespace(JsonNode user) {
    JsonNode meta = user.path("metadata");
    String userName = meta.path("name").asText();
    String uid = meta.path("uid").asText();
    String displayName = user.path("spec").path("display_name").asText("");
    String name = namespaceFor(userName);
    Map<String, String> labels = new LinkedHashMap<>();
    labels.put(MANAGED_BY_LABEL, FIELD_MANAGER);
    labels.put(USER_LABEL, userName);
    labels.put(DISPLAY_NAME_LABEL, labelValue(displayName));
    Map<String, String> annotations = Map.of(DISPLAY_NAME_ANNOTATION, displayName);

    Optional<JsonNode> current = sidecar.cache().get(namespacesInformer, "", name, JsonNode.class, ReadOptions.now().waitFor(Duration.ofSeconds(10)));
    if (current.isPresent() && upToDate(current.get().path("metadata"), labels, annotations, uid)) {
      return;
    }
    Map<String, Object> owner = new LinkedHashMap<>();
    owner.put("apiVersion", USER.apiVersion());
    owner.put("kind", USER.kind());
    owner.put("name", userName);
    owner.put("uid", uid);
    owner.put("controller", true);
    owner.put("blockOwnerDeletion", true);
    Map<String, Object> metadata = new LinkedHashMap<>();
    metadata.put("name", name);
    metadata.put("labels", labels);
    metadata.put("annotations", annotations);
    metadata.put("ownerReferences", List.of(owner));
    Map<String, Object> namespace = Map.of("apiVersion", "v1", "kind", "Namespace", "metadata", metadata);
    sidecar.objects().apply(NAMESPACE, "", name, namespace, FIELD_MANAGER, true);
    LOG.log(Level.INFO, "user {0}: namespace {1} labelled {2}", userName, name, labels.get(DISPLAY_NAME_LABEL));
  }

  /** Whether a Namespace's metadata already has the labels, annotations and single controller owner. */
  static boolean upToDate(JsonNode meta, Map<String, String> labels, Map<String, String> annotations, String uid) {
    for (Map.Entry<String, String> e : labels.entrySet()) {
      if (!e.getValue().equals(meta.path("labels").path(e.getKey()).asText(null))) {
        return false;
      }
    }
    for (Map.Entry<String, String> e : annotations.entrySet()) {
      if (!e.getValue().equals(meta.path("annotations").path(e.getKey()).asText(null))) {
        return false;
      }
    }
    List<String> controllers = new ArrayList<>();
    meta.path("ownerReferences").forEach(o -> {
      if (o.path("controller").asBoolean(false)) {
        controllers.add(o.path("uid").asText());
      }
    });
    return controllers.equals(List.of(uid));
  }
}
