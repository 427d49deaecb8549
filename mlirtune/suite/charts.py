"""The suite report's charts, each drawn on its own Agg `Figure` (no pyplot, so no global
state and no display) and returned as base64 PNG text for an `<img src="data:...">`.

Every function returns None when it has nothing to plot, so the page can say so instead.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from mlirtune.suite.compare import IMPROVED, REGRESSED, Comparison
from mlirtune.suite.results import OK, EntryResult, SuiteResults

DPI = 100
VERDICT_COLORS = {IMPROVED: "tab:green", REGRESSED: "tab:red"}  # any other verdict: grey
# Above this max/min ratio a value axis turns logarithmic, so small bars stay visible.
LOG_SPREAD = 30.0
# The tuning chart draws this many problems at most (those with the most evaluations).
MAX_CURVES = 12


@dataclass(frozen=True)
class TuningCurve:
    """One tuning problem's best GFLOP/s so far after each candidate evaluation (1-based)."""

    label: str
    evaluations: list[int]
    best_gflops: list[float]


def best_so_far(label: str, gflops: list[float | None]) -> TuningCurve | None:
    """The curve of one problem from its candidates' GFLOP/s in evaluation order (None where
    one failed or has no FLOP count): a point where the best improved, and at the last one."""
    points: list[tuple[int, float]] = []
    for index, value in enumerate(gflops, 1):
        if value and (not points or value > points[-1][1]):
            points.append((index, value))
    if not points:
        return None
    if points[-1][0] < len(gflops):
        points.append((len(gflops), points[-1][1]))
    return TuningCurve(label, [index for index, _ in points], [value for _, value in points])


def png_base64(figure: Figure) -> str:
    """The figure as base64 PNG text; the figure is cleared afterwards to free its artists."""
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    figure.clear()
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _log_if_spread(axes: Axes, values: list[float], axis: str = "y") -> None:
    positive = [v for v in values if v > 0 and np.isfinite(v)]
    if positive and max(positive) / min(positive) > LOG_SPREAD:
        (axes.set_yscale if axis == "y" else axes.set_xscale)("log")


def _measured(results: SuiteResults) -> list[EntryResult]:
    """The ok entries with a throughput of ours."""
    return [
        entry
        for entry in results.entries.values()
        if entry.status == OK and entry.ours is not None and entry.ours.gflops
    ]


def throughput_chart(results: SuiteResults) -> str | None:
    """Grouped bars: GFLOP/s of ours and of each baseline, per ok entry."""
    entries = _measured(results)
    if not entries:
        return None
    sides = ["ours", *sorted({name for entry in entries for name in entry.baselines})]
    figure = Figure(figsize=(max(6.0, 0.4 * len(entries) * len(sides) + 2), 4.5))
    axes = figure.add_subplot()
    width = 0.8 / len(sides)
    positions = np.arange(len(entries))
    every: list[float] = []
    for index, side in enumerate(sides):
        timings = [entry.ours if side == "ours" else entry.baselines.get(side) for entry in entries]
        values = [t.gflops if t is not None and t.gflops else np.nan for t in timings]
        every += values
        offset = (index - (len(sides) - 1) / 2) * width
        axes.bar(positions + offset, values, width, label=side)
    axes.set_xticks(positions, [entry.name for entry in entries], rotation=30, ha="right")
    axes.set_ylabel("GFLOP/s (median)")
    axes.set_title("Throughput: ours vs baselines")
    _log_if_spread(axes, every)
    axes.legend()
    axes.grid(axis="y", alpha=0.3)
    return png_base64(figure)


def roofline_chart(results: SuiteResults) -> str | None:
    """Achieved GFLOP/s against arithmetic intensity (FLOP/byte), both log, under the
    roofline min(peak, bandwidth x intensity) of one core; the compute ceiling of each
    thread count used is dashed (the bandwidth was measured on one core only)."""
    points = [
        (entry.name, entry.flops / entry.bytes_moved, float(entry.ours.gflops), entry.threads)
        for entry in _measured(results)
        if entry.ours is not None and entry.ours.gflops and entry.flops > 0 and entry.bytes_moved
    ]
    if not points:
        return None
    peak, bandwidth = results.manifest.peak_gflops, results.manifest.bandwidth_gbs
    ridge = peak / bandwidth if peak > 0 and bandwidth > 0 else None
    intensities = [x for _, x, _, _ in points] + ([ridge] if ridge else [])
    figure = Figure(figsize=(8, 5.5))
    axes = figure.add_subplot()
    if ridge:
        xs = np.geomspace(min(intensities) / 4, max(intensities) * 4, 200)
        label = f"one core: {peak:.3g} GFLOP/s, {bandwidth:.3g} GB/s"
        axes.plot(xs, np.minimum(peak, bandwidth * xs), color="black", label=label)
    if peak > 0:
        for threads in sorted({t for _, _, _, t in points if t > 1}):
            axes.axhline(peak * threads, ls="--", color="grey", lw=1, label=f"peak × {threads}")
    for name, intensity, gflops, _ in points:
        axes.scatter([intensity], [gflops], color="tab:blue", zorder=3)
        axes.annotate(name, (intensity, gflops), textcoords="offset points", xytext=(4, 4))
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("arithmetic intensity (FLOP/byte)")
    axes.set_ylabel("achieved GFLOP/s")
    axes.set_title("Roofline")
    axes.grid(which="both", alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(loc="lower right")
    return png_base64(figure)


def samples_chart(results: SuiteResults) -> str | None:
    """Box plots of every entry's samples divided by its median (the median in ms is in the
    label), so the spread of fast and slow entries shares one axis."""
    entries = [e for e in results.entries.values() if e.ours is not None and e.ours.samples]
    if not entries:
        return None
    data, labels = [], []
    for entry in entries:
        samples = np.asarray(entry.ours.samples if entry.ours else [], dtype=np.float64)
        median = float(np.median(samples))
        data.append(samples / median if median > 0 else samples)
        labels.append(f"{entry.name}\n{median * 1e3:.4g} ms")
    figure = Figure(figsize=(max(6.0, 0.9 * len(entries) + 2), 4.5))
    axes = figure.add_subplot()
    axes.boxplot(data)
    axes.set_xticks(range(1, len(data) + 1), labels, rotation=30, ha="right")
    axes.axhline(1.0, color="grey", lw=1)
    axes.set_ylabel("sample time / entry median")
    axes.set_title("Sample distributions (ours)")
    axes.grid(axis="y", alpha=0.3)
    return png_base64(figure)


def ratio_chart(comparisons: list[Comparison], threshold: float) -> str | None:
    """Each compared entry's speed ratio (BASE / NEW, as `compare_results` computes it: of
    the medians, relative to numpy where both runs timed it) with its 95% interval as error
    bars, a line at 1 and the band of +- threshold that counts as unchanged."""
    rows = [c for c in comparisons if c.ratio is not None]
    if not rows:
        return None
    figure = Figure(figsize=(8, 1.5 + 0.4 * len(rows)))
    axes = figure.add_subplot()
    for index, row in enumerate(rows):
        ratio = float(row.ratio or 0.0)
        low = ratio if row.ci_low is None else row.ci_low
        high = ratio if row.ci_high is None else row.ci_high
        axes.errorbar(
            [ratio],
            [index],
            xerr=[[ratio - low], [high - ratio]],
            fmt="o",
            capsize=4,
            color=VERDICT_COLORS.get(row.verdict, "tab:gray"),
        )
    axes.axvline(1.0, color="black", lw=1)
    axes.axvspan(1 - threshold, 1 + threshold, color="grey", alpha=0.15)
    axes.set_yticks(range(len(rows)), [row.name for row in rows])
    axes.set_ylim(len(rows) - 0.5, -0.5)
    axes.set_xlabel("speed ratio BASE / NEW (above 1: NEW is faster)")
    axes.set_title("Speed ratio against the baseline run (95% CI)")
    axes.grid(axis="x", alpha=0.3)
    return png_base64(figure)


def tuning_chart(curves: list[TuningCurve]) -> str | None:
    """Best GFLOP/s so far against candidate evaluation, one step line per tuning problem
    (the MAX_CURVES with the most evaluations)."""
    drawn = sorted(curves, key=lambda curve: -curve.evaluations[-1])[:MAX_CURVES]
    if not drawn:
        return None
    figure = Figure(figsize=(9, 5))
    axes = figure.add_subplot()
    for curve in drawn:
        axes.step(curve.evaluations, curve.best_gflops, where="post", marker=".", label=curve.label)
    _log_if_spread(axes, [v for curve in drawn for v in curve.best_gflops])
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("candidate evaluation")
    axes.set_ylabel("best GFLOP/s so far")
    axes.set_title("Tuning progress")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return png_base64(figure)
