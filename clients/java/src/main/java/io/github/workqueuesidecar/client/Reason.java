package io.github.workqueuesidecar.client;

import java.util.List;
import workqueue.v1.Workqueue;

/**
 * One cause for a key being queued.
 *
 * @param kind what happened
 * @param source who or what caused it: an informer's name, the reason text of an add; often empty
 * @param detail free-form detail for people; often empty
 */
public record Reason(ReasonKind kind, String source, String detail) {
  static List<Reason> of(List<Workqueue.Reason> reasons) {
    return reasons.stream().map(r -> new Reason(ReasonKind.of(r.getKind()), r.getSource(), r.getDetail())).toList();
  }
}
