"""`suite compare`: per entry, the ratio of two runs' medians with a bootstrap confidence
interval from their stored samples, and a verdict.

A ratio is BASE median / NEW median: above 1 the new run is faster. Where both runs timed
the entry's numpy baseline, each run's time is taken relative to it: that baseline ran side
by side with the kernel, so a machine that is slower or faster as a whole between the two
runs (a shared host drifts by 10% and more) cancels out. An entry regressed when the whole
interval lies below 1 - threshold (beyond noise and threshold both), improved when it lies
above 1 + threshold, and is unchanged otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlirtune.bench.stats import BOOTSTRAP_RESAMPLES
from mlirtune.suite.results import OK, EntryResult, SuiteResults

IMPROVED, REGRESSED, UNCHANGED, FAILED, MISSING = (
    "improved",
    "regressed",
    "unchanged",
    "failed",
    "missing",
)
# Verdicts that fail a CI job (exit 1).
FAILING = (REGRESSED, FAILED)
DEFAULT_THRESHOLD = 0.03
# The baseline each run's times are taken relative to, where both runs have it.
REFERENCE = "numpy"


@dataclass(frozen=True)
class Comparison:
    """One entry of two runs: the speed ratio (BASE / NEW median time) with its 95% interval,
    and the verdict; the ratio is None when either side has no timing."""

    name: str
    verdict: str
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    base_median_s: float | None = None
    new_median_s: float | None = None
    note: str = ""


def compare_results(
    base: SuiteResults, new: SuiteResults, threshold: float = DEFAULT_THRESHOLD, seed: int = 0
) -> list[Comparison]:
    """A Comparison for every entry of either run, in BASE's order then NEW's additions."""
    names = list(base.entries) + [name for name in new.entries if name not in base.entries]
    rng = np.random.default_rng(seed)
    return [
        _compare(name, base.entries.get(name), new.entries.get(name), threshold, rng)
        for name in names
    ]


def _compare(
    name: str,
    base: EntryResult | None,
    new: EntryResult | None,
    threshold: float,
    rng: np.random.Generator,
) -> Comparison:
    if base is None or new is None:
        side = "BASE" if base is None else "NEW"
        return Comparison(name, MISSING, note=f"not in {side}")
    if new.status != OK or new.ours is None:
        return Comparison(name, FAILED, note=new.error or f"status {new.status} in NEW")
    if base.status != OK or base.ours is None:
        return Comparison(name, MISSING, note=f"status {base.status} in BASE")
    sides = [base.ours.samples, new.ours.samples]
    reference = REFERENCE in base.baselines and REFERENCE in new.baselines
    if reference:
        sides += [base.baselines[REFERENCE].samples, new.baselines[REFERENCE].samples]
    medians = [np.median(np.asarray(samples)) for samples in sides]
    picked = [_resampled_medians(np.asarray(samples), rng) for samples in sides]
    ratio, resampled = medians[0] / medians[1], picked[0] / picked[1]
    if reference:  # (base ours / base numpy) / (new ours / new numpy)
        ratio, resampled = ratio * medians[3] / medians[2], resampled * picked[3] / picked[2]
    low, high = (float(x) for x in np.percentile(resampled, [2.5, 97.5]))
    if high < 1 - threshold:
        verdict = REGRESSED
    elif low > 1 + threshold:
        verdict = IMPROVED
    else:
        verdict = UNCHANGED
    note = f"relative to {REFERENCE}" if reference else "absolute times"
    return Comparison(name, verdict, float(ratio), low, high, *map(float, medians[:2]), note)


def _resampled_medians(samples: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Medians of BOOTSTRAP_RESAMPLES resamples of `samples` (with replacement)."""
    return np.median(rng.choice(samples, (BOOTSTRAP_RESAMPLES, samples.size)), axis=1)
