package io.github.workqueuesidecar.client;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.Objects;

/** How a {@link WorkqueueClient} connects and decodes. Immutable; each method returns a changed copy. */
public final class ClientOptions {
  private final String workerName;
  private final ObjectMapper mapper;
  private final Duration callTimeout;

  private ClientOptions(String workerName, ObjectMapper mapper, Duration callTimeout) {
    this.workerName = workerName;
    this.mapper = mapper;
    this.callTimeout = callTimeout;
  }

  /** Worker name hostname/pid, a Jackson mapper that ignores unknown fields, 30 s per unary call. */
  public static ClientOptions defaults() {
    ObjectMapper mapper = new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);
    return new ClientOptions(defaultWorkerName(), mapper, Duration.ofSeconds(30));
  }

  /** The holder name KeyState shows for this client's leases. */
  public ClientOptions workerName(String name) {
    return new ClientOptions(Objects.requireNonNull(name, "workerName"), mapper, callTimeout);
  }

  /** The Jackson mapper that decodes cached objects and encodes written ones. */
  public ClientOptions objectMapper(ObjectMapper objectMapper) {
    return new ClientOptions(workerName, Objects.requireNonNull(objectMapper, "objectMapper"), callTimeout);
  }

  /** The deadline of each unary call (a cache read's wait is added to it). */
  public ClientOptions callTimeout(Duration timeout) {
    return new ClientOptions(workerName, mapper, Objects.requireNonNull(timeout, "callTimeout"));
  }

  public String workerName() {
    return workerName;
  }

  public ObjectMapper objectMapper() {
    return mapper;
  }

  public Duration callTimeout() {
    return callTimeout;
  }

  private static String defaultWorkerName() {
    String host;
    try {
      host = InetAddress.getLocalHost().getHostName();
    } catch (UnknownHostException e) {
      host = "unknown";
    }
    return host + "/" + ProcessHandle.current().pid();
  }
}
