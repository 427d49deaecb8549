"""Turn tuning results into spec entries: the tuner's verdict per workload, with provenance.

An entry is named after its workload (`matmul_K512_M512_N512_f32`, see `entry_name`) and
matches the root op of that workload's payload, rebuilt from the options stored with the
verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlir import ir

import mlirtune
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.target import Target
from mlirtune.interfaces.workload import Workload
from mlirtune.ir.context import new_context
from mlirtune.ir.roots import ROOT_ATTRIBUTE
from mlirtune.iree.problem import PIPELINE_NAME as IREE_PIPELINE
from mlirtune.schedules.roots import annotate_roots
from mlirtune.specs.library import SpecLibrary
from mlirtune.specs.matchers import OpSignature, signature_of
from mlirtune.specs.merge import root_ops
from mlirtune.specs.sources import SPEC_SUFFIXES, fetch
from mlirtune.toolchain import current_toolchain, digest
from mlirtune.tune.db import TuningDB, Verdict
from mlirtune.tune.key import TuningKey
from mlirtune.workloads import WORKLOADS, workload_class

if TYPE_CHECKING:
    from mlirtune.tune.results import TuneReport


def entry_name(workload: dict[str, Any], pipeline: str) -> str:
    """`<workload>_<dim><size>..._<dtype>[_<option>...][_<pipeline>]`, a valid symbol name:
    loop dims in name order, then the workload options that differ from their defaults
    (e.g. `stride2`, `relu`), then the pipeline when it is not the workload's own."""
    options = workload["options"]
    dims = "_".join(f"{k}{v}" for k, v in sorted(workload["dims"].items()))
    parts = [options["name"], dims, workload["dtypes"][0]]
    # A workload that is not built in (a model's dispatch) has no defaults to leave out.
    defaults = workload_class(options["name"])().describe() if options["name"] in WORKLOADS else {}
    for key, value in sorted(options.items()):
        if key in ("name", "seed", "dtype") or key[:1].isupper() or defaults.get(key) == value:
            continue
        parts.append(key if value is True else f"{key}{value}")
    stem = pipeline.rsplit("/", 1)[-1]
    return "_".join(parts if stem == options["name"] else [*parts, stem])


def entry_metadata(key: TuningKey, verdict: Verdict, target_class: str) -> dict[str, Any]:
    """What `specs list` shows and staleness checks read: workload, pipeline, speedup and
    the target (fingerprint hash, summary, hardware class) and toolchain it was measured on.
    The class decides where the entry applies (see specset.py)."""
    target = key.target
    return {
        "workload": key.workload["options"],
        "kind": key.workload["kind"],
        "pipeline": key.pipeline,
        "speedup": round(verdict.speedup, 4),
        "won": verdict.won,
        "median_s": verdict.median_s,
        "gflops": round(verdict.gflops or 0.0, 2),
        "tuned_at": verdict.created_at,
        "target": {
            "hash": digest(target),
            "summary": target_summary(target, target_class),
            "class": target_class,
        },
        "toolchain": {
            "hash": digest(key.toolchain),
            "summary": ", ".join(f"{k} {v}" for k, v in sorted(key.toolchain.items())),
        },
    }


def target_summary(fingerprint: dict[str, Any], target_class: str | None = None) -> str:
    """ "avx512 <CPU model> (<class>)": how listings and warnings name a target."""
    summary = f"{fingerprint.get('isa', '?')} {fingerprint.get('model', '')}".strip()
    return f"{summary} ({target_class})" if target_class else summary


def library_metadata(target: Target) -> dict[str, Any]:
    """The `mlirtune.library` attribute of a new library tuned on `target`."""
    fingerprint = target.fingerprint()
    return {
        "target": target.spec_library_name() or target.name,
        "target_class": target.hardware_class(),
        "target_hash": digest(fingerprint),
        "target_summary": target_summary(fingerprint, target.hardware_class()),
        "toolchain": current_toolchain(),
        "mlirtune": mlirtune.__version__,
    }


def library_path(path: str | Path) -> Path:
    """`path` as a library to write; one that is not .mlir/.mlirbc is a usage error."""
    if Path(path).suffix not in SPEC_SUFFIXES:
        raise UsageError(f"{path}: a spec library is a .mlir or .mlirbc file", stage="specs")
    return Path(path)


def library_at(path: str | Path, target: Target) -> SpecLibrary:
    """The library at `path` (see `library_path`), or a new one for `target` if there is
    none (inside an MLIR context)."""
    if library_path(path).exists():
        return SpecLibrary.parse(fetch(str(path)))
    return SpecLibrary.create(Path(path).stem, library_metadata(target))


def rebuild_workload(options: dict[str, Any]) -> Workload:
    """The workload described by stored options ({"name": ..., **options})."""
    rest = dict(options)
    try:
        return workload_class(rest.pop("name"))(**rest)
    except (UsageError, TypeError, KeyError) as error:
        raise UsageError(f"cannot rebuild workload {options}: {error}", stage="specs") from None


def payload_root(workload: dict[str, Any]) -> tuple[ir.Module, int]:
    """The annotated payload of a stored workload identity and the index (among its root
    ops) of the root of the stored kind; inside an MLIR context."""
    payload = rebuild_workload(workload["options"]).payload_module()
    annotate_roots(payload)
    kinds = [_kind(op) for op in root_ops(payload)]
    if workload["kind"] not in kinds:
        raise UsageError(
            f"workload {workload['options']} has no {workload['kind']} root op", stage="specs"
        )
    return payload, kinds.index(workload["kind"])


def signature_for(workload: dict[str, Any]) -> OpSignature:
    """The root-op signature of a stored workload identity (inside an MLIR context)."""
    payload, index = payload_root(workload)
    return signature_of(root_ops(payload)[index])


def _kind(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes[ROOT_ATTRIBUTE]).value


def add_verdict(
    library: SpecLibrary,
    key: TuningKey,
    verdict: Verdict,
    target_class: str,
    extra: dict[str, Any] | None = None,
    workload: Workload | None = None,
) -> str:
    """Add (or replace) the entry for `key`'s workload and pipeline, measured on a target of
    `target_class`, with `extra` metadata; returns its name. The root op's signature is
    read from `workload` when given (one that cannot be rebuilt from its name, such as a
    model's dispatch), else from the workload the key's options rebuild."""
    name = entry_name(key.workload, key.pipeline)
    metadata = {**entry_metadata(key, verdict, target_class), **(extra or {})}
    if workload is None:
        signature = signature_for(key.workload)
    else:
        payload = workload.payload_module()
        annotate_roots(payload)
        signature = signature_of(root_ops(payload)[0])
    library.add(name, signature, verdict.params, metadata)
    return name


def write_verdict(path: str, report: TuneReport) -> str:
    """Add or replace a tuning run's entry in the library at `path` (created if missing);
    returns the entry name. The root signature comes from the run's own workload."""
    problem = report.problem
    target = problem.target
    with new_context(), ir.Location.unknown():
        library = library_at(path, target)
        name = add_verdict(
            library, problem.key, report.verdict, target.hardware_class(), workload=problem.workload
        )
        library.save(path)
    return name


def export_library(
    db: TuningDB, target: Target, name: str, *, workloads: list[str] | None = None
) -> SpecLibrary:
    """A library (in the current context) of the latest verdict per workload and pipeline
    tuned on `target` with any toolchain; `workloads` keeps only those workload names."""
    verdicts = [
        (key, verdict)
        for key, verdict in db.verdicts(target_hash=digest(target.fingerprint()))
        if key.pipeline != IREE_PIPELINE  # IREE's knobs: its own specs (tune --update-spec)
    ]
    if workloads:
        verdicts = [(k, v) for k, v in verdicts if k.workload["options"]["name"] in workloads]
    if not verdicts:
        which = f" for workload(s) {', '.join(workloads)}" if workloads else ""
        raise UsageError(
            f"tuning database {db.path} holds no tuning verdicts for this target{which}; "
            "run `mlirtune tune` first",
            stage="specs",
        )
    library = SpecLibrary.create(name, library_metadata(target))
    for key, verdict in verdicts:  # oldest first: a later verdict replaces an earlier one
        add_verdict(library, key, verdict, target.hardware_class())
    return library
