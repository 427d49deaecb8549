"""How many independent FMAs this host's cores keep in flight (pipes x latency): the least
accumulators a register tile needs to keep every FMA pipe busy (BLIS's analytical rule).

Measured once per CPU and boot by a JIT micro-benchmark (mlirtune.peak.measure_fma_in_flight)
in a child process, since kernels are compiled on floors above this one, and cached beside
the measured peaks (measured_facts). $MLIRTUNE_FMA_IN_FLIGHT gives the figure instead, e.g.
to select for a known core without measuring; the tests pin it that way.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

from mlirtune.interfaces.errors import UsageError
from mlirtune.targets.isa import ISA_VARIABLE
from mlirtune.targets.measured_facts import cache_key, cached

VARIABLE = "MLIRTUNE_FMA_IN_FLIGHT"
SUFFIX = "/fma_in_flight"
# The most FMAs in flight a figure may give (a cached one past it is corrupt): the micro-
# benchmark's chains never exceed 16 (workloads/fma_peak.CHAINS).
MOST = 32
# Seconds the child may take: starting Python and MLIR, two small JIT compiles and six
# timings of up to 0.3 s (peak.IN_FLIGHT_PASSES).
CHILD_TIMEOUT_S = 300


class MeasurementFailed(Exception):
    """The child measuring the FMAs in flight failed; nothing is cached."""


def host_fma_in_flight(identity: dict[str, object], nominal: int) -> int:
    """FMAs in flight on this host, whose CPU `identity` (model, ISA, flags) keys the cache:
    $MLIRTUNE_FMA_IN_FLIGHT where set, else the cached or newly measured figure rounded
    to a whole number, else (the measurement failed, with a warning) `nominal`."""
    given = os.environ.get(VARIABLE, "").strip()
    if given:
        if not given.isdigit() or not 1 <= int(given) <= MOST:
            raise UsageError(
                f"{VARIABLE}={given!r}: give the FMAs a core keeps in flight as a whole "
                f"number from 1 to {MOST} (pipes x latency, e.g. 8 for two pipes of 4 cycles)",
                stage="target",
            )
        return int(given)
    try:
        measured = cached(
            cache_key(identity) + SUFFIX,
            lambda: _measure_in_child(str(identity["isa"]), nominal),
            valid=_plausible,
        )
    except MeasurementFailed as error:
        warnings.warn(
            f"could not measure the FMAs this CPU keeps in flight ({error}); taking {nominal}",
            stacklevel=3,
        )
        return nominal
    return round(measured)


def _plausible(figure: float) -> bool:
    return 1 <= figure <= MOST


def _measure_in_child(isa: str, nominal: int) -> float:
    """`python -m mlirtune.peak`'s figure at `isa`'s width; the child selects with
    `nominal` FMAs in flight (its micro-benchmark has no register tiles), so it never
    measures again itself."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "mlirtune.peak"],
            env={**os.environ, VARIABLE: str(nominal), ISA_VARIABLE: isa},
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise MeasurementFailed(str(error)) from None
    lines = done.stdout.strip().splitlines()
    try:
        value = float(lines[-1]) if done.returncode == 0 and lines else None
    except ValueError:
        value = None
    if value is None or not _plausible(value):
        said = done.stderr.strip().splitlines()[-1:] or lines[-1:] or ["no output"]
        raise MeasurementFailed(f"the micro-benchmark exited {done.returncode}: {said[0]}")
    return value
