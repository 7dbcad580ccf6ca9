package io.github.workqueuesidecar.client;

import java.time.Duration;
import java.util.Objects;

/**
 * Filters and options of a cache listing; filters combine with AND:
 * {@code ListOptions.inNamespace("web").labels("app=web")}. Immutable; each method returns a
 * changed copy.
 */
public final class ListOptions {
  final String namespace;
  final String labelSelector;
  final String indexName;
  final String indexValue;
  final ReadOptions read;
  final int pageSize;

  private ListOptions(String namespace, String labelSelector, String indexName, String indexValue, ReadOptions read, int pageSize) {
    this.namespace = namespace;
    this.labelSelector = labelSelector;
    this.indexName = indexName;
    this.indexValue = indexValue;
    this.read = read;
    this.pageSize = pageSize;
  }

  /** Every cached object. */
  public static ListOptions all() {
    return new ListOptions("", "", "", "", ReadOptions.now(), 0);
  }

  /** Only objects in {@code namespace}. */
  public static ListOptions inNamespace(String namespace) {
    return all().namespace(namespace);
  }

  public ListOptions namespace(String ns) {
    return new ListOptions(Objects.requireNonNull(ns, "namespace"), labelSelector, indexName, indexValue, read, pageSize);
  }

  /** Only objects whose labels match this selector, in the API server's syntax ("app=web,tier!=cache"). */
  public ListOptions labels(String selector) {
    return new ListOptions(namespace, Objects.requireNonNull(selector, "selector"), indexName, indexValue, read, pageSize);
  }

  /** Only objects under {@code value} in the informer's index {@code name}. */
  public ListOptions index(String name, String value) {
    return new ListOptions(namespace, labelSelector, Objects.requireNonNull(name, "index"), Objects.requireNonNull(value, "value"), read, pageSize);
  }

  /** Read-your-writes and waiting, as for a get. */
  public ListOptions read(ReadOptions options) {
    return new ListOptions(namespace, labelSelector, indexName, indexValue, Objects.requireNonNull(options, "read"), pageSize);
  }

  /** Objects per page asked of the sidecar (the listing reads every page); 0 lets the sidecar choose. */
  public ListOptions pageSize(int size) {
    return new ListOptions(namespace, labelSelector, indexName, indexValue, read, size);
  }
}
