package io.github.workqueuesidecar.client;

import io.grpc.StatusRuntimeException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import workqueue.v1.Cache.GetObjectRequest;
import workqueue.v1.Cache.GetObjectResponse;
import workqueue.v1.Cache.ListObjectsRequest;
import workqueue.v1.Cache.ListObjectsResponse;
import workqueue.v1.CacheServiceGrpc;

/**
 * Reads from the sidecar's informer caches, so a reconciler never asks the API server to read.
 * Objects decode with the client's Jackson mapper into your own types or {@code JsonNode}.
 */
public final class Cache {
  private final WorkqueueClient client;

  Cache(WorkqueueClient client) {
    this.client = client;
  }

  /** The object decoded as {@code type}; empty when the cache does not hold it. */
  public <T> Optional<T> get(String informer, String namespace, String name, Class<T> type) {
    return get(informer, namespace, name, type, ReadOptions.now());
  }

  public <T> Optional<T> get(String informer, String namespace, String name, Class<T> type, ReadOptions options) {
    return getObject(informer, namespace, name, options).map(o -> o.as(type));
  }

  /** The cached object with its resourceVersion and deleted flag; empty when the cache does not hold it. */
  public Optional<CachedObject> getObject(String informer, String namespace, String name, ReadOptions options) {
    GetObjectRequest req = GetObjectRequest.newBuilder()
        .setInformer(informer)
        .setNamespace(namespace == null ? "" : namespace)
        .setName(name)
        .setMinResourceVersion(options.minResourceVersion)
        .setWait(Protos.duration(options.wait))
        .setIncludeDeleted(options.includeDeleted)
        .build();
    GetObjectResponse resp;
    try {
      resp = stub(options).getObject(req);
    } catch (StatusRuntimeException e) {
      throw Errors.of("get " + namespace + "/" + name + " from informer " + informer, client.target(), e);
    }
    return resp.hasObject() ? Optional.of(new CachedObject(resp.getObject(), client.options().objectMapper())) : Optional.empty();
  }

  /** Every matching object decoded as {@code type}, in namespace/name order (all pages). */
  public <T> List<T> list(String informer, Class<T> type, ListOptions options) {
    return listObjects(informer, options).stream().map(o -> o.as(type)).toList();
  }

  /** Every matching cached object, in namespace/name order (all pages). */
  public List<CachedObject> listObjects(String informer, ListOptions options) {
    List<CachedObject> out = new ArrayList<>();
    String token = "";
    do {
      ListObjectsRequest req = ListObjectsRequest.newBuilder()
          .setInformer(informer)
          .setNamespace(options.namespace)
          .setLabelSelector(options.labelSelector)
          .setIndexName(options.indexName)
          .setIndexValue(options.indexValue)
          .setMinResourceVersion(options.read.minResourceVersion)
          .setWait(Protos.duration(options.read.wait))
          .setPageSize(options.pageSize)
          .setPageToken(token)
          .build();
      ListObjectsResponse resp;
      try {
        resp = stub(options.read).listObjects(req);
      } catch (StatusRuntimeException e) {
        throw Errors.of("list informer " + informer, client.target(), e);
      }
      resp.getObjectsList().forEach(o -> out.add(new CachedObject(o, client.options().objectMapper())));
      token = resp.getNextPageToken();
    } while (!token.isEmpty());
    return out;
  }

  private CacheServiceGrpc.CacheServiceBlockingStub stub(ReadOptions options) {
    long millis = client.options().callTimeout().plus(options.wait).toMillis();
    return client.cacheStub.withDeadlineAfter(millis, TimeUnit.MILLISECONDS);
  }
}
