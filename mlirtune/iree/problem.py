"""Tuning an IREE dispatch with this project's tuner: its problem and its evaluator.

The problem is one workload's tuned root (IreeEngine.tuned_root) on a host target: the
space of its lowering-config knobs (mlirtune/iree/tiles.py), IREE's own config as the
baseline, records keyed on IREE's version and flags besides the workload and the CPU.
A candidate's time is that dispatch's alone, inside the module's runs (profile.py). The
candidates run in the same isolated workers as the project's own (memory cap, timeouts,
one benchmark core), each worker with an IREE engine.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.workload import Workload
from mlirtune.iree.engine import IreeEngine
from mlirtune.iree.tiles import IREE_DEFAULT, KNOBS, PIPELINES, IreeRoot, search_space
from mlirtune.iree.tools import TARGET_FLAGS
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.toolchain import current_toolchain, digest
from mlirtune.tune.db import TuningDB, Verdict
from mlirtune.tune.evaluator import EvaluatorSettings, IsolatedEvaluator
from mlirtune.tune.key import TuningKey
from mlirtune.tune.problem import TuningProblem, check_worker_memory, workload_identity
from mlirtune.tune.results import TuneReport
from mlirtune.tune.tuner import TuneObserver, TuneOptions, tune

PIPELINE_NAME = "iree-llvmcpu"
TIMED = "the dispatch alone, from the runtime's profile"  # what a record's samples time


def iree_problem(
    workload: Workload,
    target: HostCPU,
    root: IreeRoot,
    settings: EvaluatorSettings | None = None,
) -> TuningProblem:
    """The search over the knobs of `root`, a dispatch of `workload`, on `target`."""
    check_worker_memory(workload, settings or EvaluatorSettings())
    return TuningProblem(
        workload, target, PIPELINE_NAME, None, None, root_info(root), {k: k for k in KNOBS},
        search_space(root, target), iree_key(workload, target, root),
        untuned=dict(IREE_DEFAULT), timed_flops=root.flops,
    )  # fmt: skip


def iree_key(workload: Workload, target: HostCPU, root: IreeRoot) -> TuningKey:
    """What the records and verdict of `root`'s search are keyed on: the workload and its
    dispatch, the CPU, this install's IREE, and IREE's flags, pipelines and knobs."""
    return TuningKey(
        workload={**workload_identity(workload, root_info(root)), "dispatch": root.dispatch},
        target=target.fingerprint(),
        toolchain=current_toolchain(iree=True),
        pipeline=PIPELINE_NAME,
        pipeline_hash=digest(
            {"flags": TARGET_FLAGS, "translation": PIPELINES, "knobs": KNOBS, "timed": TIMED}
        ),
    )


def root_info(root: IreeRoot) -> OpInfo:
    """The root as the tuner's reports describe ops: its M, N and K sizes (a
    convolution's output pixels, output channels and input channels)."""
    dims = {role.upper(): root.size(role) for role in ("m", "n", "k")}
    assert root.roles is not None
    if root.kind == "convolution":
        kind = "conv2d"
    else:
        kind = "batch_matmul" if root.roles["batch"] else "matmul"
    return OpInfo(kind, dims, root.dtypes, root.op_name)


def iree_engine(
    target: HostCPU, pipeline: object = None, use_specs: bool = False, *, dispatch: str
) -> IreeEngine:
    """A worker's engine (EvaluatorSettings.engine, bound to `dispatch`): IREE's, with no
    spec library, its parameters setting that dispatch's config and its benchmarks timing
    that dispatch alone."""
    return IreeEngine(target, dispatch=dispatch, time_dispatch=True)


def iree_evaluator(
    problem: TuningProblem, root: IreeRoot, settings: EvaluatorSettings
) -> IsolatedEvaluator:
    """Isolated workers that compile and time candidates for `root` with IREE."""
    return IsolatedEvaluator(
        problem.workload,
        problem.target,
        problem.pipeline,
        dataclasses.replace(
            settings, engine=functools.partial(iree_engine, dispatch=root.dispatch)
        ),
    )


def tune_root(
    problem: TuningProblem,
    root: IreeRoot,
    options: TuneOptions,
    db: TuningDB,
    observer: TuneObserver | None = None,
) -> TuneReport:
    """Search and race `problem`, the knobs of `root` (iree_problem), with IREE."""
    evaluator = iree_evaluator(problem, root, options.evaluator)
    return tune(problem, options, db, observer, evaluator=evaluator)


# How tune_dispatches runs one dispatch's search: given the root, its problem, the open
# database and the search itself (called with an observer, or None), the report; None when
# the search was interrupted.
DispatchSearch = Callable[
    [IreeRoot, TuningProblem, TuningDB, Callable[[TuneObserver | None], TuneReport]],
    TuneReport | None,
]


def tune_dispatches(
    workload: Workload,
    target: HostCPU,
    roots: list[IreeRoot],
    options: TuneOptions,
    db_path: str,
    search: DispatchSearch | None = None,
) -> list[tuple[IreeRoot, TuneReport]] | None:
    """Each root's search and race in turn (tune_root), each run through `search` (by
    default silently); None once one was interrupted (what was measured is saved)."""
    tuned = []
    for root in roots:
        with TuningDB(db_path) as db:
            problem = iree_problem(workload, target, root, options.evaluator)

            def run(observer: TuneObserver | None, problem=problem, root=root, db=db) -> TuneReport:
                return tune_root(problem, root, options, db, observer)

            report = search(root, problem, db, run) if search else run(None)
        if report is None:
            return None
        tuned.append((root, report))
    return tuned


def distinct_tunable(roots: list[IreeRoot]) -> list[IreeRoot]:
    """The tunable roots, one per op, sizes and types (IREE may form several alike)."""
    seen: set[tuple] = set()
    distinct = []
    for root in roots:
        identity = (root.op_name, root.loops, root.dtypes)
        if root.tunable and identity not in seen:
            seen.add(identity)
            distinct.append(root)
    return distinct


def recorded_verdicts(
    db: TuningDB, workload: Workload, target: HostCPU, roots: list[IreeRoot]
) -> list[tuple[IreeRoot, Verdict | None]]:
    """Each root's latest verdict tuned on `target` with this install's IREE (None where
    its dispatch was never tuned so)."""
    return [(root, db.verdict(iree_key(workload, target, root))) for root in roots]
