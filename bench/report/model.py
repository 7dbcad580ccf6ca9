"""What a benchmark section is: its metrics, its targets, and the figures read back from a run."""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import statistics

OURS = "workqueue-sidecar"


@dataclasses.dataclass(frozen=True)
class Metric:
    """One measured quantity; each of its variants is a row of the section's table."""

    key: str
    title: str
    unit: str
    log_scale: bool = False
    # True when a larger value is better (throughput); only used in wording.
    higher_is_better: bool = False
    # False for counts that only say yes or no (zero keys missed): in the table, not the plot.
    plotted: bool = True


@dataclasses.dataclass(frozen=True)
class Target:
    """A target from an issue, checked on the medians of a run.

    kind:
      ratio_max  median(a) / median(b) <= limit
      ratio_min  median(a) / median(b) >= limit
      abs_max    median(a) <= limit
      abs_min    median(a) >= limit
      diff_max   median(a) - median(b) <= limit
    variant None means every variant of the metric, one verdict each.
    b_metric reads b's figure from another metric (same variant), when the
    target compares two shapes of one measurement.
    why is shown only when the target is missed.
    """

    label: str
    kind: str
    metric: str
    a: str
    limit: float
    b: str | None = None
    variant: str | None = None
    why: str = ""
    b_metric: str | None = None


@dataclasses.dataclass(frozen=True)
class Section:
    key: str
    title: str
    command: str
    about: str
    programs: tuple[str, ...]
    metrics: tuple[Metric, ...]
    targets: tuple[Target, ...] = ()
    notes: str = ""


@dataclasses.dataclass
class Figures:
    """The raw figures of one section's run: values per (metric, variant, program)."""

    meta: dict[str, str]
    values: dict[tuple[str, str, str], list[float]]

    @classmethod
    def read(cls, path: pathlib.Path) -> "Figures":
        meta: dict[str, str] = {}
        values: dict[tuple[str, str, str], list[float]] = collections.defaultdict(list)
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            if line.startswith("#"):
                key, _, value = line[1:].partition(":")
                meta[key.strip()] = value.strip()
                continue
            fields = line.split("\t")
            if len(fields) != 5:
                raise ValueError(f"{path}:{number}: expected 5 tab-separated fields, got {len(fields)}: {line!r}")
            metric, variant, program, _run, value = fields
            values[(metric, variant, program)].append(float(value))
        return cls(meta, dict(values))

    def variants(self, metric: str) -> list[str]:
        return list(dict.fromkeys(v for (m, v, _p) in self.values if m == metric))

    def get(self, metric: str, variant: str, program: str) -> list[float] | None:
        return self.values.get((metric, variant, program))

    def median(self, metric: str, variant: str, program: str) -> float | None:
        xs = self.get(metric, variant, program)
        return statistics.median(xs) if xs else None
