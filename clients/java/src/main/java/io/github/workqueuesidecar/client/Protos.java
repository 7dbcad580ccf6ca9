package io.github.workqueuesidecar.client;

import com.google.protobuf.Timestamp;
import java.time.Duration;
import java.time.Instant;

/** Conversions between protobuf's well-known types and java.time. */
final class Protos {
  private Protos() {}

  static com.google.protobuf.Duration duration(Duration d) {
    return com.google.protobuf.Duration.newBuilder().setSeconds(d.getSeconds()).setNanos(d.getNano()).build();
  }

  static Duration duration(com.google.protobuf.Duration d) {
    return Duration.ofSeconds(d.getSeconds(), d.getNanos());
  }

  /** The instant, or null for an unset (zero) timestamp. */
  static Instant instant(boolean set, Timestamp t) {
    if (!set || (t.getSeconds() == 0 && t.getNanos() == 0)) {
      return null;
    }
    return Instant.ofEpochSecond(t.getSeconds(), t.getNanos());
  }
}
