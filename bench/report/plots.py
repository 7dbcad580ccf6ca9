"""One PNG per section: a panel per metric, bars per program at each variant, whiskers from min to max."""

from __future__ import annotations

import pathlib
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (the backend must be chosen first)

from model import Figures, Section  # noqa: E402

COLORS = {
    "workqueue-sidecar": "#1f77b4",
    "client-go": "#2ca02c",
    "client-go-json": "#98df8a",
    "json-read": "#c7c7c7",
    "controller-runtime": "#d62728",
    "go": "#17becf",
    "python": "#ff7f0e",
    "typescript": "#9467bd",
    "java": "#8c564b",
    "kopf": "#e377c2",
    "kopf-event": "#f7b6d2",
    "single": "#7f7f7f",
    "1 replica": "#aec7e8",
    "2 replicas": "#6baed6",
    "3 replicas": "#1f77b4",
    "1 → 3 → 1 replicas": "#bcbd22",
}


def plot(section: Section, figures: Figures, path: pathlib.Path) -> bool:
    """Writes the section's plot to `path`; False when there is nothing to plot."""
    metrics = [m for m in section.metrics if m.plotted and figures.variants(m.key)]
    if not metrics:
        return False
    cols = min(2, len(metrics))
    rows = (len(metrics) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 3.0 * rows + 1.0), squeeze=False)
    width = 0.8 / len(section.programs)
    for ax, metric in zip(axes.flat, metrics):
        variants = figures.variants(metric.key)
        for pi, program in enumerate(section.programs):
            xs, meds, lo, hi = [], [], [], []
            for vi, variant in enumerate(variants):
                values = figures.get(metric.key, variant, program)
                if not values:
                    continue
                median = statistics.median(values)
                xs.append(vi + (pi - (len(section.programs) - 1) / 2) * width)
                meds.append(median)
                lo.append(median - min(values))
                hi.append(max(values) - median)
            if xs:
                ax.bar(xs, meds, width, yerr=[lo, hi], capsize=3, label=program, color=COLORS.get(program))
        # A variant with a comma ("5,000 objects, p99") is shown on two lines, so neighbours do not overlap.
        ax.set_xticks(range(len(variants)), [v.replace(", ", "\n") for v in variants], fontsize=8)
        ax.set_ylabel(metric.unit + (" (log scale)" if metric.log_scale else ""))
        if metric.log_scale:
            ax.set_yscale("log")
        ax.set_title(metric.title, fontsize=10)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    # About an inch on top for the title and the legend, whatever the number of rows; laid out
    # before they are added, so tight_layout does not make room for them a second time.
    height = fig.get_figheight()
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.9 / height))
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.suptitle(f"{section.title}\n(median of the runs; whiskers: min-max)", fontsize=10, y=1 - 0.05 / height)
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), fontsize=9,
               bbox_to_anchor=(0.5, 1 - 0.5 / height))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True
