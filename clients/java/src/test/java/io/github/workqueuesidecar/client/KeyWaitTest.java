package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * A lease for a key whose earlier reconcile still runs in this process (its lease lost, its signal
 * ignored), against a sidecar faked in-process so that the test says when each lease comes and
 * goes: it waits in its slot, and lost while it waits it is never started.
 */
class KeyWaitTest {
  @Test
  @DisplayName("a lease for a key whose lost reconcile still runs waits in its slot, and is never started if lost meanwhile")
  void aLeaseLostWhileItWaitsForItsKeyNeverStarts() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    List<Long> started = new CopyOnWriteArrayList<>();
    try (LogRecords logs = new LogRecords(Worker.class);
        FakeWorkServer fake = FakeWorkServer.start(FakeWorkServer.FinishAnswer.NONE);
        WorkqueueClient client = WorkqueueClient.connect(fake.target());
        Worker w = client.queue("default").start((req, signal) -> {
          started.add(req.lease().token());
          if (req.lease().token() == 1) {
            release.await(60, TimeUnit.SECONDS); // ignores its signal
          }
          return Result.done();
        }, RunOptions.concurrency(3));
        // Closed first: a failed assertion does not leave the worker's stop waiting on it.
        AutoCloseable unblock = release::countDown) {
      eventually("the stream open", fake::opened);
      fake.lease("ns/a", 1);
      eventually("the first reconcile to start", () -> started.size() == 1);
      fake.revoke("ns/a", 1, "revoked by the test"); // lost; its reconcile goes on
      fake.lease("ns/a", 2);
      eventually("the second lease to wait for the key", () -> logs.messages().stream().anyMatch(l -> l.contains("waiting for the earlier reconcile of ns/a")));
      fake.revoke("ns/a", 2, "revoked by the test"); // lost while it waits
      eventually("the lost waiting lease answered", () -> fake.finished().contains("2 RETRY"));
      fake.lease("ns/a", 3);
      Thread.sleep(200);
      assertEquals(List.of(1L), started, "a lease started while an earlier reconcile of its key ran");
      release.countDown();
      eventually("the third lease finished once the first reconcile returned", () -> fake.finished().size() == 3);
      assertEquals(List.of(1L, 3L), started, "the lease lost while it waited was started");
      // The lost lease 2 is answered first; the lost reconcile's Finish (1) and
      // the third lease's race once the first reconcile returns.
      List<String> finished = fake.finished();
      assertEquals("2 RETRY", finished.get(0));
      assertEquals(Set.of("1 RETRY", "3 SUCCESS"), Set.copyOf(finished.subList(1, 3)));
    }
  }
}
