package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.grpc.Status;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.logging.SimpleFormatter;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * TLS and mTLS through {@link ClientOptions#tls}, against the real sidecar serving TLS on its TCP
 * listener, on certificates the {@code openssl} command line makes for this class: a CA, another CA,
 * a server certificate for 127.0.0.1 and localhost and one for another host, a client certificate of
 * the CA and one of the other CA (as clients/python/tests/test_tls.py makes them; clients/go/workqueue/tls_test.go makes
 * the same with crypto/x509).
 */
class TlsTest {
  @TempDir static Path pki;

  @BeforeAll
  static void certificates() throws Exception {
    authority("ca");
    authority("other-ca");
    leaf("server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost");
    leaf("elsewhere", "ca", "subjectAltName=DNS:wq.elsewhere.example");
    leaf("client", "ca", "extendedKeyUsage=clientAuth");
    leaf("stranger", "other-ca", "extendedKeyUsage=clientAuth");
  }

  private static Sidecar servingTls(String... extra) {
    return serving("server", extra);
  }

  private static Sidecar serving(String cert, String... extra) {
    List<String> args = new ArrayList<>(List.of("--tls-cert", pki.resolve(cert + ".pem").toString(), "--tls-key", pki.resolve(cert + ".key").toString()));
    args.addAll(List.of(extra));
    return Sidecar.start(null, args.toArray(String[]::new));
  }

  /** Adds a key and reconciles it on the Work stream, over a connection made with {@code options}. */
  private static void roundTrip(Sidecar s, ClientOptions options) throws InterruptedException {
    try (WorkqueueClient client = WorkqueueClient.connect(s.address(), options.callTimeout(Duration.ofSeconds(5)))) {
      Queue q = client.queue("default");
      q.add("k");
      CountDownLatch reconciled = new CountDownLatch(1);
      try (Worker w = q.start((req, signal) -> {
        reconciled.countDown();
        return Result.done();
      }, RunOptions.concurrency(1))) {
        assertTrue(reconciled.await(10, TimeUnit.SECONDS), "the key was not reconciled");
      }
      eventually("the key forgotten", () -> q.keyState("k").state() == KeyStatus.State.ABSENT);
    }
  }

  private static ClientOptions trusting(String ca) {
    return ClientOptions.defaults().tls(pki.resolve(ca + ".pem"));
  }

  private static ClientOptions presenting(String name) {
    return ClientOptions.defaults().tls(pki.resolve("ca.pem"), pki.resolve(name + ".pem"), pki.resolve(name + ".key"));
  }

  @Test
  void tlsServesClientsThatTrustItsCa() throws Exception {
    try (Sidecar s = servingTls()) {
      roundTrip(s, trusting("ca"));

      // Another CA: a typed error (an UnavailableException) that says why.
      TlsHandshakeException untrusted = assertThrows(TlsHandshakeException.class, () -> roundTrip(s, trusting("other-ca")));
      assertEquals(Status.Code.UNAVAILABLE, untrusted.code());
      assertTrue(untrusted.getMessage().contains("TLS handshake") && untrusted.getMessage().contains("certification path"), untrusted.getMessage());
      // No CA file: the JVM's default trust store, which does not hold the test's CA.
      assertThrows(TlsHandshakeException.class, () -> roundTrip(s, ClientOptions.defaults().tls(null)));
      // Plaintext to a TLS listener fails too (grpc-java reports INTERNAL: http2 exception).
      assertThrows(WorkqueueException.class, () -> roundTrip(s, ClientOptions.defaults()));
    }
  }

  @Test
  void aCertificateThatDoesNotNameTheHostIsRefused() throws Exception {
    try (Sidecar s = serving("elsewhere")) {
      TlsHandshakeException e = assertThrows(TlsHandshakeException.class, () -> roundTrip(s, trusting("ca")));
      assertTrue(e.getMessage().contains("No subject alternative names matching IP address 127.0.0.1"), e.getMessage());
    }
  }

  @Test
  void aWorkerThatCannotShakeHandsKeepsRetryingAndSaysWhy() throws Exception {
    Logger log = Logger.getLogger(Worker.class.getName());
    List<String> warnings = new CopyOnWriteArrayList<>();
    Handler handler = new Handler() {
      @Override
      public void publish(LogRecord r) {
        warnings.add(new SimpleFormatter().formatMessage(r));
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    log.addHandler(handler);
    try (Sidecar s = servingTls();
        WorkqueueClient client = WorkqueueClient.connect(s.address(), trusting("other-ca"));
        Worker w = client.queue("default").start((req, signal) -> Result.done(), RunOptions.concurrency(1).reconnectBackoff(Duration.ofMillis(50), Duration.ofMillis(200)))) {
      eventually("two reconnect warnings naming the TLS failure",
          () -> warnings.stream().filter(m -> m.contains("reopening") && m.contains("TLS handshake") && m.contains("certification path")).count() >= 2);
      assertFalse(w.done().isDone(), "the worker gave up");
    } finally {
      log.removeHandler(handler);
    }
  }

  @Test
  void mtlsNeedsAClientCertificateOfItsCa() throws Exception {
    try (Sidecar s = servingTls("--tls-client-ca", pki.resolve("ca.pem").toString())) {
      roundTrip(s, presenting("client"));

      // Refused without a certificate, and with one of another CA (which the JDK does not even send:
      // the server's request names the CAs it accepts). TLS 1.3: the refusal is an alert after the
      // handshake, "certificate_required".
      TlsHandshakeException none = assertThrows(TlsHandshakeException.class, () -> roundTrip(s, trusting("ca")));
      assertTrue(none.getMessage().contains("certificate"), none.getMessage());
      TlsHandshakeException stranger = assertThrows(TlsHandshakeException.class, () -> roundTrip(s, presenting("stranger")));
      assertTrue(stranger.getMessage().contains("certificate"), stranger.getMessage());
    }
  }

  @Test
  void tlsFilesThatCannotBeUsedFailTheConnectNamingThem() throws Exception {
    UncheckedIOException missing = assertThrows(UncheckedIOException.class,
        () -> WorkqueueClient.connect("127.0.0.1:1", ClientOptions.defaults().tls(pki.resolve("missing.pem"))));
    assertTrue(missing.getMessage().contains("missing.pem"), missing.getMessage());

    // The client's key as SEC1 ("BEGIN EC PRIVATE KEY"), not PKCS#8: netty cannot read it (without BouncyCastle).
    openssl("ec", "-in", "client.key", "-out", "client-sec1.key");
    assertTrue(Files.readString(pki.resolve("client-sec1.key")).contains("BEGIN EC PRIVATE KEY"));
    IllegalArgumentException badKey = assertThrows(IllegalArgumentException.class, () -> WorkqueueClient.connect("127.0.0.1:1",
        ClientOptions.defaults().tls(pki.resolve("ca.pem"), pki.resolve("client.pem"), pki.resolve("client-sec1.key"))));
    assertTrue(badKey.getMessage().contains("client-sec1.key") && badKey.getMessage().contains("BEGIN EC PRIVATE KEY")
        && badKey.getMessage().contains("openssl pkcs8 -topk8"), badKey.getMessage());

    assertThrows(IllegalArgumentException.class, () -> new ClientOptions.Tls(null, pki.resolve("client.pem"), null));
    assertThrows(IllegalArgumentException.class, () -> WorkqueueClient.connect("unix:///tmp/x.sock", trusting("ca")));
  }

  private static void authority(String name) throws Exception {
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj", "/CN=wqs java test " + name);
  }

  private static void leaf(String name, String authority, String extension) throws Exception {
    Files.writeString(pki.resolve(name + ".ext"), extension + "\n");
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=wqs java test " + name);
    openssl("x509", "-req", "-in", name + ".csr", "-CA", authority + ".pem", "-CAkey", authority + ".key",
        "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", name + ".ext");
  }

  private static void openssl(String... args) throws Exception {
    List<String> command = new ArrayList<>(List.of("openssl"));
    command.addAll(List.of(args));
    Process p;
    try {
      p = new ProcessBuilder(command).directory(pki.toFile()).redirectErrorStream(true).start();
    } catch (IOException e) {
      throw new IllegalStateException("the TLS tests make their certificates with the openssl command line: " + e, e);
    }
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (p.waitFor() != 0) {
      fail(String.join(" ", command) + ":\n" + out);
    }
  }
}
