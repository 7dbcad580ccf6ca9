"""Checks a section's targets on the medians of a run and says by how much each is met or missed."""

from __future__ import annotations

import dataclasses

from model import Figures, Target


@dataclasses.dataclass(frozen=True)
class Verdict:
    target: Target
    variant: str
    measured: str  # what was compared, in words and figures
    met: bool | None  # None: a figure is missing
    margin: str  # "met", "MISSED by ...", or why it cannot be judged


def fmt(x: float) -> str:
    """A figure with as many digits as a reader needs."""
    if x != x:  # NaN
        return "—"
    ax = abs(x)
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    return f"{x:#.3g}"


def check(target: Target, figures: Figures, unit: str) -> list[Verdict]:
    variants = [target.variant] if target.variant else figures.variants(target.metric)
    if not variants:
        return [Verdict(target, "—", "no figures", None, "not measured")]
    return [_check_one(target, variant, figures, unit) for variant in variants]


def _check_one(t: Target, variant: str, figures: Figures, unit: str) -> Verdict:
    a = figures.median(t.metric, variant, t.a)
    b = figures.median(t.b_metric or t.metric, variant, t.b) if t.b else None
    if a is None or (t.b and b is None):
        return Verdict(t, variant, "a figure is missing", None, "not measured")
    upper = t.kind.endswith("_max")
    sign = "≤" if upper else "≥"
    if t.kind in ("ratio_max", "ratio_min"):
        assert b is not None
        value = a / b
        names = f"{t.a} ({t.metric}) / {t.b} ({t.b_metric})" if t.b_metric else f"{t.a} / {t.b}"
        measured = f"{names} = {fmt(a)} / {fmt(b)} = **{fmt(value)}x** (target {sign} {fmt(t.limit)}x)"
    elif t.kind in ("abs_max", "abs_min"):
        value = a
        measured = f"{t.a}: **{fmt(a)} {unit}** (target {sign} {fmt(t.limit)} {unit})"
    elif t.kind == "diff_max":
        assert b is not None
        value = a - b
        measured = f"{t.a} − {t.b} = {fmt(a)} − {fmt(b)} = **{fmt(value)} {unit}** (target ≤ {fmt(t.limit)} {unit})"
    else:
        raise ValueError(f"unknown target kind {t.kind!r}")
    met = value <= t.limit if upper else value >= t.limit
    return Verdict(t, variant, measured, met, "met" if met else f"**{_shortfall(t, value, unit)}**")


def _shortfall(t: Target, value: float, unit: str) -> str:
    """By how much `value` misses the target, in the target's own terms."""
    if t.kind == "diff_max":
        return f"MISSED by {fmt(value - t.limit)} {unit}"
    if t.kind.endswith("_max"):
        return f"MISSED by {_percent(value / t.limit - 1)}"
    if t.kind == "ratio_min":
        return f"MISSED: {fmt(value)}x instead of {fmt(t.limit)}x ({_percent(1 - value / t.limit)} short)"
    return f"MISSED by {100 * (1 - value / t.limit):.1f} %"


def _percent(fraction: float) -> str:
    """`fraction` as a percentage with the decimals a small miss needs, so
    that a miss never reads as 0 %."""
    percent = 100 * fraction
    decimals = 0 if percent >= 1 else 1 if percent >= 0.1 else 2
    return f"{max(percent, 10**-decimals):.{decimals}f} %"
