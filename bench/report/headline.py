"""The document's opening summary: what choosing the sidecar costs, in a few sentences computed from the figures."""

from __future__ import annotations

from model import OURS, Figures
from verdict import fmt


def _med(figures: Figures | None, metric: str, variant: str | None, program: str) -> float | None:
    """The median of one figure; variant None takes the metric's first variant."""
    if figures is None:
        return None
    variants = figures.variants(metric)
    if not variants:
        return None
    return figures.median(metric, variant if variant is not None else variants[0], program)


def _all(*values: float | None) -> bool:
    return all(v is not None and v > 0 for v in values)


def headline(loaded: dict[str, Figures]) -> list[str]:
    """Bullets for the sections that were measured; none for those that were not."""
    out: list[str] = []
    remote = loaded.get("remote")
    cr = "controller-runtime"
    total, total_cr = _med(remote, "total", None, OURS), _med(remote, "total", None, cr)
    d50, d50_cr = _med(remote, "dispatch", "p50", OURS), _med(remote, "dispatch", "p50", cr)
    d99, d99_cr = _med(remote, "dispatch", "p99", OURS), _med(remote, "dispatch", "p99", cr)
    cpu, cpu_cr = _med(remote, "cpu", None, OURS), _med(remote, "cpu", None, cr)
    rss, rss_cr = _med(remote, "rss", None, OURS), _med(remote, "rss", None, cr)
    create, create_cr = _med(remote, "create", None, OURS), _med(remote, "create", None, cr)
    if _all(total, total_cr, d50, d50_cr, d99, d99_cr, cpu, cpu_cr, rss, rss_cr):
        # Said only when the figures show it: each side done within 2 % of its creators.
        bound = (
            ", both finishing with the creation itself (the API server sets the pace)"
            if _all(create, create_cr) and total / create <= 1.02 and total_cr / create_cr <= 1.02
            else ""
        )
        out.append(
            f"- **A reconciler behind the sidecar against a controller-runtime controller** (no-op, new objects "
            f"created as fast as the API server takes them): {fmt(total / total_cr)}x controller-runtime's time "
            f"until all are reconciled{bound}; from an event queued to its reconcile, p50 "
            f"{fmt(d50)} ms against {fmt(d50_cr)} ms and p99 {fmt(d99)} ms against {fmt(d99_cr)} ms; "
            f"{fmt(cpu / cpu_cr)}x the CPU (the sidecar and the Go worker process against one controller "
            f"process) and {fmt(rss)} MiB against {fmt(rss_cr)} MiB."
        )
    kopf = loaded.get("kopf")
    largest = kopf.variants("total")[-1] if kopf is not None and kopf.variants("total") else None
    if kopf is not None and largest is not None:
        total, total_k = _med(kopf, "total", largest, OURS), _med(kopf, "total", largest, "kopf")
        cpu, cpu_k = _med(kopf, "cpu", largest, OURS), _med(kopf, "cpu", largest, "kopf")
        cpu_e = _med(kopf, "cpu", largest, "kopf-event")
        rss, rss_k = _med(kopf, "rss", largest, OURS), _med(kopf, "rss", largest, "kopf")
        if _all(total, total_k, cpu, cpu_k, cpu_e, rss, rss_k):
            out.append(
                f"- **A Python worker behind the sidecar against a kopf operator** (no-op, {largest}): "
                f"{fmt(total / total_k)}x kopf's time until all are reconciled, {fmt(cpu / cpu_k)}x its CPU "
                f"({fmt(cpu / cpu_e)}x that of kopf's cheapest handler, on.event) and {fmt(rss)} MiB against "
                f"{fmt(rss_k)} MiB (the sidecar and the worker process against kopf's one process)."
            )
    informer = loaded.get("informer")
    rss, rss_cg = _med(informer, "rss", "after sync", OURS), _med(informer, "rss", "after sync", "client-go")
    sync, sync_cg = _med(informer, "sync", None, OURS), _med(informer, "sync", None, "client-go")
    sync_json = _med(informer, "sync", None, "client-go-json")
    if _all(rss, rss_cg, sync, sync_cg, sync_json):
        out.append(
            f"- **The shared cache** (10,000 ConfigMaps): {fmt(rss / rss_cg)}x client-go's memory; the first sync "
            f"takes {fmt(sync / sync_cg)}x client-go's time, both reading protobuf, and {fmt(sync / sync_json)}x "
            f"that of client-go reading JSON (the wire format of custom resources)."
        )
    ingest = loaded.get("ingest")
    cpu, cpu_cg = _med(ingest, "cpu", "ingest", OURS), _med(ingest, "cpu", "ingest", "client-go")
    rss, rss_cg = _med(ingest, "rss", "after ingest", OURS), _med(ingest, "rss", "after ingest", "client-go")
    if _all(cpu, cpu_cg, rss, rss_cg):
        out.append(
            f"- **100,000 objects and 100,000 updates**: {fmt(rss)} MiB against client-go's {fmt(rss_cg)} MiB, and "
            f"{fmt(cpu)} s of CPU to take the updates in against {fmt(cpu_cg)} s."
        )
    clients = loaded.get("clients")
    names = {"go": "Go", "python": "Python", "typescript": "TypeScript", "java": "Java"}
    rates = {p: _med(clients, "rate", "concurrency 4", p) for p in names}
    ceiling = _med(clients, "rate", "concurrency 4", "client-go")
    if _all(*rates.values(), ceiling):
        listed = ", ".join(f"{names[p]} {fmt(r)}/s" for p, r in sorted(rates.items(), key=lambda pr: -pr[1]))
        out.append(
            f"- **A no-op reconciler through each client** (one worker process on the `Work` stream, 4 at once, "
            f"the keys already queued): {listed}; the same handler on client-go's workqueue inside one process "
            f"(no sidecar, nothing crossing a process): {fmt(ceiling)}/s."
        )
    queue = loaded.get("queue")
    c1, c1_cg = _med(queue, "c_one_thread", "N=1", OURS), _med(queue, "c", "N=1", "client-go")
    c1_cr = _med(queue, "c", "N=1", cr)
    e, e_cg = _med(queue, "e", None, OURS), _med(queue, "e", None, "client-go")
    if _all(c1, c1_cg, c1_cr, e, e_cg):
        out.append(
            f"- **The queue core** (one producer, one consumer, in the sidecar's one-thread shape): {fmt(c1)} µs "
            f"per item, {fmt(c1 / c1_cg)}x "
            f"client-go's plain FIFO and {fmt(c1_cr / c1)}x faster than controller-runtime's priority queue; a "
            f"fresh high-priority key behind 100,000 queued keys is handed out in {fmt(e)} µs, where client-go's "
            f"FIFO makes it wait {fmt(e_cg / 1000)} ms."
        )
    return out
