package io.github.workqueuesidecar.client;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.grpc.ChannelCredentials;
import io.grpc.TlsChannelCredentials;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;

/** How a {@link WorkqueueClient} connects and decodes. Immutable; each method returns a changed copy. */
public final class ClientOptions {
  private final String workerName;
  private final ObjectMapper mapper;
  private final Duration callTimeout;
  private final Tls tls; // null: plaintext

  /**
   * The PEM files of a TLS connection.
   *
   * @param caFile CA certificates that sign the sidecar's certificate; null: the JVM's default trust
   *     store
   * @param certFile the client's certificate chain, for mTLS; null: none (with keyFile)
   * @param keyFile the client's private key (PKCS#8, "BEGIN PRIVATE KEY"), for mTLS; null: none
   */
  public record Tls(Path caFile, Path certFile, Path keyFile) {
    public Tls {
      if ((certFile == null) != (keyFile == null)) {
        throw new IllegalArgumentException("workqueue: TLS certFile and keyFile go together: give both for mTLS, or neither");
      }
    }

    /** grpc-java's TLS credentials, the files read now. */
    ChannelCredentials credentials() {
      TlsChannelCredentials.Builder b = TlsChannelCredentials.newBuilder();
      try {
        if (caFile != null) {
          b.trustManager(caFile.toFile());
        }
      } catch (IOException e) {
        throw new UncheckedIOException("workqueue: TLS: cannot read caFile " + caFile + ": " + e, e);
      }
      try {
        if (certFile != null) {
          b.keyManager(certFile.toFile(), keyFile.toFile());
        }
      } catch (IOException e) {
        throw new UncheckedIOException("workqueue: TLS: cannot read certFile " + certFile + " or keyFile " + keyFile + ": " + e, e);
      }
      return b.build();
    }

    /** Why netty may have refused the key: its PEM header if it is not PKCS#8; else empty. */
    String keyHint() {
      if (keyFile == null) {
        return "";
      }
      try (var lines = Files.lines(keyFile)) {
        return lines.filter(l -> l.startsWith("-----BEGIN ")).findFirst()
            .filter(header -> !header.equals("-----BEGIN PRIVATE KEY-----"))
            .map(header -> " (keyFile holds " + header + "; netty reads PKCS#8, -----BEGIN PRIVATE KEY-----: "
                + "openssl pkcs8 -topk8 -nocrypt -in " + keyFile + " -out KEY.pk8)")
            .orElse("");
      } catch (IOException | UncheckedIOException e) {
        return "";
      }
    }
  }

  private ClientOptions(String workerName, ObjectMapper mapper, Duration callTimeout, Tls tls) {
    this.workerName = workerName;
    this.mapper = mapper;
    this.callTimeout = callTimeout;
    this.tls = tls;
  }

  /** Worker name hostname/pid, a Jackson mapper that ignores unknown fields, 30 s per unary call, plaintext. */
  public static ClientOptions defaults() {
    ObjectMapper mapper = new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);
    return new ClientOptions(defaultWorkerName(), mapper, Duration.ofSeconds(30), null);
  }

  /** The holder name KeyState shows for this client's leases. */
  public ClientOptions workerName(String name) {
    return new ClientOptions(Objects.requireNonNull(name, "workerName"), mapper, callTimeout, tls);
  }

  /** The Jackson mapper that decodes cached objects and encodes written ones. */
  public ClientOptions objectMapper(ObjectMapper objectMapper) {
    return new ClientOptions(workerName, Objects.requireNonNull(objectMapper, "objectMapper"), callTimeout, tls);
  }

  /** The deadline of each unary call (a cache read's wait is added to it). */
  public ClientOptions callTimeout(Duration timeout) {
    return new ClientOptions(workerName, mapper, Objects.requireNonNull(timeout, "callTimeout"), tls);
  }

  /**
   * Connect over TLS, for a sidecar whose TCP listener serves it ({@code --tls-cert}, {@code
   * --tls-key}): trust the CA certificates in {@code caFile} (PEM; null: the JVM's default trust
   * store). The sidecar's certificate must name the target's host (an IP address SAN for {@code
   * 127.0.0.1:port}). The files are read when the client connects.
   */
  public ClientOptions tls(Path caFile) {
    return new ClientOptions(workerName, mapper, callTimeout, new Tls(caFile, null, null));
  }

  /**
   * Connect over mutual TLS, for a sidecar started with {@code --tls-client-ca} too: trust {@code
   * caFile} (as {@link #tls(Path)}) and present the certificate chain in {@code certFile} with the
   * private key in {@code keyFile} (PEM, PKCS#8: "BEGIN PRIVATE KEY"; convert another with {@code
   * openssl pkcs8 -topk8 -nocrypt}).
   */
  public ClientOptions tls(Path caFile, Path certFile, Path keyFile) {
    return new ClientOptions(workerName, mapper, callTimeout,
        new Tls(caFile, Objects.requireNonNull(certFile, "certFile"), Objects.requireNonNull(keyFile, "keyFile")));
  }

  /** The TLS files; empty for plaintext (the default). */
  public Optional<Tls> tls() {
    return Optional.ofNullable(tls);
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
