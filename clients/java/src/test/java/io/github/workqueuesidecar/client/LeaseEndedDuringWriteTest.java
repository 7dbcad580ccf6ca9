package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.logging.Level;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import workqueue.v1.Workqueue.WorkRequest;

/**
 * A reconcile that throws {@link LeaseEndedDuringWriteException} (here as the cause of another
 * exception, as a reconciler would wrap it), against a sidecar faked in-process: a write under the
 * lease was made, but the sidecar ended the lease before the API server answered, so the lease is
 * lost. No outcome is sent (the sidecar would refuse it as stale, a WARNING), only the Finish every
 * lost lease gets, whose refusal is expected; one WARNING names the queue, the key and why.
 */
class LeaseEndedDuringWriteTest {
  @Test
  @DisplayName("a reconcile whose lease ended during a write is finished as lost, with one WARNING")
  void aLeaseEndedDuringAWriteIsFinishedAsLost() throws Exception {
    try (LogRecords records = new LogRecords(Session.class, Worker.class);
        FakeWorkServer fake = FakeWorkServer.start(FakeWorkServer.FinishAnswer.REFUSED_AS_STALE);
        WorkqueueClient client = WorkqueueClient.connect(fake.target());
        Worker w = client.queue("default").start((req, signal) -> {
          throw new IllegalStateException("create the child of " + req.key(),
              new LeaseEndedDuringWriteException("the write was made, but the lease ended before the API server answered it"));
        }, RunOptions.concurrency(1))) {
      eventually("the stream open", fake::opened);
      fake.lease("ns/a", 7);
      eventually("the lease finished", () -> fake.finishes().size() == 1);
      WorkRequest.Finish finish = fake.finishes().get(0);
      assertEquals(7, finish.getToken());
      assertEquals("lease lost before the worker finished", finish.getRetry().getError(), finish.toString());
      Thread.sleep(200); // the refusal comes back, and is expected
      List<String> loud = records.lines(Level.WARNING);
      assertEquals(1, loud.size(), loud.toString());
      assertTrue(loud.get(0).startsWith("WARNING") && loud.get(0).contains("ns/a") && loud.get(0).contains("queue default")
          && loud.get(0).contains("lost: lease ended during write"), loud.get(0));
    }
  }
}
