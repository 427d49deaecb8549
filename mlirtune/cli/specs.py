"""`mlirtune specs`: export, list, verify, merge, explain and adapt tuning-spec libraries."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mlir import ir

from mlirtune.cli.common import (
    add_command_group,
    add_db_argument,
    add_spec_arguments,
    add_target_argument,
    engine_of,
    label,
    plural,
    seconds,
    target_of,
    workload_of,
)
from mlirtune.cli.tune_iree import add_iree_model_arguments, refuse_iree_model_arguments
from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.context import new_context

EPILOG = """\
examples:
  mlirtune specs export --db tuning.db -o my-specs.mlir
  mlirtune specs export --db tuning.db --workload matmul -o matmuls.mlirbc
  mlirtune specs export --engine iree --payload examples/iree/mlp.mlir --entry mlp -o mlp.mlir
  mlirtune specs list
  mlirtune specs list my-specs.mlir
  mlirtune specs verify my-specs.mlir
  mlirtune specs merge mine.mlir team.mlir -o merged.mlir
  mlirtune specs show --for matmul M=512 N=512 K=512
  mlirtune specs adapt --dry-run

A spec library is a transform module: each entry is a matcher (op name, loop sizes, element
widths, multiply-add body, M/N/K loops, convolution strides) and an action that annotates the
matched op with its tuned config. Compiles (run, bench, opt, the engine API) apply, in order:
--spec libraries, $MLIRTUNE_SPECS (a path list), $XDG_CONFIG_HOME/mlirtune/specs/, then the
libraries shipped for the target's ISA, one per CPU class they were tuned on (this host's
class first); the first matching entry tuned for the pipeline wins and the parameter
selector decides where none matches. Each entry records the CPU class it was tuned on
(e.g. amd-zen4):
- an entry of this host's class tuned on another CPU of it or with another toolchain applies
  if its config is valid here, and is skipped otherwise;
- an entry of another class (or with no class, of another CPU) is not applied: the next
  matching entry gets its chance. `mlirtune tune` starts its search from such entries, and
  `mlirtune specs adapt` races the shipped classes' configs on this host and writes the
  winners into $XDG_CONFIG_HOME/mlirtune/specs/adapted-<class>.mlir.
Either case is a warning for your own libraries and a note in the compile's provenance
(bench's `note:` lines, `notes` in --json) for the shipped ones.
"""
ADAPT = (
    "Race, on this host, the configs the shipped libraries for this ISA hold for each "
    "workload (one per CPU class they were tuned on) against the parameter selector's "
    "(the untuned compile), and write the winner as an entry tuned on this host. Each "
    "candidate is compiled, verified and timed in a worker process (one that fails is "
    "reported and skipped), then raced against the selector in interleaved rounds; a "
    "class's config wins only if it beat the selector in every round. The library is "
    "saved after each workload, so an interrupted run keeps what it finished; running "
    "again races every workload again. Measurements go to the tuning database."
)
ADAPT_EPILOG = """\
examples:
  mlirtune specs adapt --dry-run
  mlirtune specs adapt --workload mlp
  mlirtune specs adapt --workload matmul --max-time 0.4 -o matmuls-here.mlir
  mlirtune specs list          # the adapted library comes before the shipped ones
"""


def add_specs_parser(subparsers: Any) -> None:
    """Register `specs` and its commands on the `mlirtune` command parser."""
    text = "export, list, verify, merge and explain tuning-spec libraries"
    command = add_command_group(subparsers, "specs", text, EPILOG)

    export = command("export", "write the tuner's verdict per workload as a library", _export)
    add_db_argument(export)
    export.add_argument(
        "--workload", action="append", default=[], metavar="NAME", help="only these workloads"
    )
    written = export.add_mutually_exclusive_group(required=True)
    written.add_argument(
        "-o",
        "--output",
        metavar="LIB.mlir|LIB.mlirbc",
        help="library to write (replaced if it exists; to add to a library, use "
        "`mlirtune tune --update-spec LIB`)",
    )
    written.add_argument(
        "--per-class",
        metavar="DIR",
        type=Path,
        help="write DIR/CLASS.mlir for every CPU class a fleet tuned (`tune --ray "
        "--per-class`), each from the verdicts measured on that class",
    )
    add_target_argument(export)
    add_iree_model_arguments(export)
    listing = command("list", "entries with speedup and provenance", _list)
    listing.add_argument("libraries", nargs="*", metavar="LIB", help="default: those applied")
    add_target_argument(listing)
    verify = command("verify", "parse, verify, find overlaps, check staleness", _verify)
    verify.add_argument("libraries", nargs="+", metavar="LIB")
    add_target_argument(verify)
    merge = command("merge", "merge libraries into one, earlier entries first", _merge)
    merge.add_argument("libraries", nargs="+", metavar="LIB")
    merge.add_argument("-o", "--output", required=True, metavar="OUT.mlir|OUT.mlirbc")
    add_target_argument(merge)
    show = command("show", "which entry would configure a workload, and why", _show)
    show.add_argument(
        "--for", dest="workload", required=True, metavar="WORKLOAD", help="built-in workload"
    )
    show.add_argument("options", nargs="*", metavar="KEY=VALUE", help="workload options")
    show.add_argument("--pipeline", metavar="NAME|FILE.yaml", help="pipeline descriptor")
    show.set_defaults(payload=None)
    add_target_argument(show)
    add_spec_arguments(show)
    text = "race the shipped classes' configs on this host; keep the winners"
    adapt = command("adapt", text, _adapt, ADAPT, ADAPT_EPILOG)
    adapt.add_argument(
        "--workload",
        action="append",
        default=[],
        metavar="NAME",
        help="only the entries tuned on this workload (repeatable; default: every one)",
    )
    adapt.add_argument(
        "-o",
        "--output",
        metavar="LIB.mlir|LIB.mlirbc",
        help="library the winners are written into, its other entries kept (default: "
        "$XDG_CONFIG_HOME/mlirtune/specs/adapted-<class>.mlir, which every compile applies)",
    )
    adapt.add_argument(
        "--max-time",
        type=seconds,
        default=0.2,
        metavar="S",
        help="race time per candidate in seconds, > 0: about S / 0.04 interleaved rounds, at "
        "least 2 (default: %(default)s); a class's config must win every round",
    )
    adapt.add_argument(
        "--dry-run", action="store_true", help="list the workloads and candidates; run nothing"
    )
    add_db_argument(adapt)


def _libraries(names: list[str], target) -> list:
    """`names` parsed in order (inside an MLIR context); none: the libraries compiles apply."""
    from mlirtune.specs.specset import SpecSet

    if not names:
        return SpecSet.for_target(target).libraries()
    return SpecSet.for_target(target, names, configured=False, defaults=False).libraries()


def _export(args: argparse.Namespace) -> int:
    from mlirtune.curation.export import export_library
    from mlirtune.tune.db import TuningDB

    if args.engine == "iree":
        from mlirtune.cli.tune_iree import export_iree_spec

        return export_iree_spec(args)
    refuse_iree_model_arguments(args)
    if args.per_class:
        return _export_per_class(args)
    target = target_of(args)
    with new_context(), ir.Location.unknown(), TuningDB(args.db, readonly=True) as db:
        library = export_library(db, target, Path(args.output).stem, workloads=args.workload)
        path = library.save(args.output)
        print(f"wrote {plural(len(library.entries), 'entry')} to {path}")
    return 0


def _export_per_class(args: argparse.Namespace) -> int:
    """One library per CPU class a fleet tuned, each tagged with its class."""
    from mlirtune.curation.export import export_library
    from mlirtune.fleet.target import FleetCPU
    from mlirtune.tune.db import TuningDB

    with TuningDB(args.db, readonly=True) as db:
        classes = db.cpu_classes()
        if not classes:
            raise UsageError(
                f"tuning database {db.path} holds no fleet-tuned CPU classes; run "
                "`mlirtune tune --ray --per-class` first",
                stage="specs",
            )
        args.per_class.mkdir(parents=True, exist_ok=True)
        for name, description in classes:
            target = FleetCPU.from_description(description)
            with new_context(), ir.Location.unknown():
                try:
                    library = export_library(db, target, name, workloads=args.workload)
                except UsageError as error:  # e.g. its search was interrupted before a verdict
                    print(f"skipped CPU class {name}: {error}")
                    continue
                path = library.save(args.per_class / f"{name}.mlir")
            print(f"wrote {plural(len(library.entries), 'entry')} for {target!r} to {path}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from mlirtune.specs.specset import foreign_class, stale_reasons

    target = target_of(args)
    with new_context(), ir.Location.unknown():
        libraries = _libraries(args.libraries, target)
        if not libraries:
            print("no spec library applies (none configured, none shipped for this target)")
        for library in libraries:
            tuned_for = library.metadata.get("target_summary") or "unknown target"
            count = plural(len(library.entries), "entry")
            print(f"{library.name} ({library.origin}): {count}, tuned for {tuned_for}")
            for entry in library.entries:
                speedup = f"{entry.speedup:.3f}x" if entry.speedup else "  -   "
                stale = "; ".join(stale_reasons(entry, target))
                config = " ".join(f"{k}={v}" for k, v in (entry.config or {}).items())
                print(f"  {entry.name:44s} {speedup}  {entry.pipeline or '*':12s} {config}")
                tuned_on = foreign_class(entry, target)
                if tuned_on:
                    here = target.hardware_class()
                    print(f"  {'':44s} not applied: tuned on CPU class {tuned_on}, not {here}")
                elif stale:
                    print(f"  {'':44s} stale: tuned {stale}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from mlirtune.curation.check import check

    target = target_of(args)
    with new_context(), ir.Location.unknown():
        libraries = _libraries(args.libraries, target)
        reports = check(libraries, target)
    for library in libraries:
        print(f"{library.origin}: parses and verifies, {plural(len(library.entries), 'entry')}")
    for report in reports:
        if report.error:
            print(f"  error  {report.label}: {report.error}")
        elif report.matches_own is False:
            print(f"  error  {report.label}: does not match the payload it was tuned on")
        if report.shadowed_by:
            print(f"  overlap {report.label}: {report.shadowed_by} also matches it and wins")
        if report.foreign:
            print(
                f"  other class {report.label}: tuned on CPU class {report.foreign}, not "
                f"{target.hardware_class()}; not applied (`mlirtune specs adapt` races it here)"
            )
        elif report.stale:
            verdict = (
                f"not applied: breaks {', '.join(report.broken)}"
                if report.broken
                else "its config is checked when the model compiles"
                if report.model
                else "applies (valid here)"
            )
            print(f"  stale  {report.label}: tuned {'; '.join(report.stale)}; {verdict}")
        elif report.broken:
            print(f"  moved  {report.label}: not applied, pinned {report.broken[0]}")
    models = sorted({r.model for r in reports if r.model})
    if models:
        tuned = plural(sum(bool(r.model) for r in reports), "entry")
        print(
            f"  {tuned} tuned on dispatches of {', '.join(models)}: only the model makes their "
            "payloads (`mlirtune run --torch MODEL --spec LIBRARY` lists what they match)"
        )
    bad = [r for r in reports if not r.ok]
    overlaps = [r for r in reports if r.shadowed_by]
    print(f"{plural(len(reports), 'entry')}: {len(bad)} with problems, {len(overlaps)} shadowed")
    return 1 if bad else 0


def _merge(args: argparse.Namespace) -> int:
    from mlirtune.curation.check import check
    from mlirtune.specs.merge import merge

    target = target_of(args)
    with new_context(), ir.Location.unknown():
        libraries = _libraries(args.libraries, target)
        merged, _ = merge(libraries, Path(args.output).stem)
        for report in check(libraries, target):
            if report.shadowed_by:
                print(f"overlap: {report.shadowed_by} wins over {report.label}")
        path = merged.save(args.output)
        entries, sources = plural(len(merged.entries), "entry"), plural(len(libraries), "library")
        print(f"wrote {entries} from {sources} to {path}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from mlirtune.schedules.roots import annotate_roots
    from mlirtune.specs.merge import probe
    from mlirtune.specs.specset import foreign_class

    workload = workload_of(args)
    engine = engine_of(args)
    lowering = engine.plan(workload)
    print(f"{label(workload.describe())}: pipeline {lowering.descriptor.name}")
    specs = engine.specs
    if specs is None:
        print("  spec libraries disabled (--no-specs)")
    else:
        with new_context(), ir.Location.unknown():
            for library in specs.libraries():
                payload = workload.payload_module()
                annotate_roots(payload)
                hits = [name for names in probe(library, payload) for name in names]
                for name in hits:
                    entry = library.entry(name)
                    fits = entry.pipeline in (None, lowering.descriptor.name)
                    why = "" if fits else f" (tuned for pipeline {entry.pipeline}: ignored)"
                    tuned_on = foreign_class(entry, engine.target)
                    if fits and tuned_on:
                        why = f" (tuned on CPU class {tuned_on}: not applied here)"
                    print(f"  matches {library.name}:{name}{why}")
                if not hits:
                    print(f"  no entry of {library.name} ({library.origin}) matches")
    source = lowering.config_source
    values = " ".join(f"{k}={v}" for k, v in lowering.values.items())
    print(f"config: {source}: {values}")
    if source in ("selector", "descriptor", "default") and specs is not None:
        print("  (no entry for this pipeline matched, or a stale one was skipped)")
    for note in lowering.notes:
        print(f"  note: {note}")
    return 0


def _adapt(args: argparse.Namespace) -> int:
    """Race the shipped classes' configs on this host (see mlirtune.curation.adapt)."""
    from rich.console import Console

    from mlirtune.curation.adapt import AdaptOptions, adapt, default_output, shipped_jobs
    from mlirtune.curation.export import library_path
    from mlirtune.targets.host_cpu import HostCPU
    from mlirtune.tune.db import TuningDB

    target = HostCPU()
    output = library_path(args.output) if args.output else default_output(target)
    jobs = shipped_jobs(target, args.workload)
    console = Console(highlight=False, soft_wrap=True)
    here = target.hardware_class()
    console.print(
        f"adapting {plural(len(jobs), 'workload')} to this host ({here}) into {output}",
        markup=False,
    )
    if args.dry_run:
        for job in jobs:
            candidates = ", ".join(["selector", *job.classes(here)])
            console.print(f"  {job.label}: {candidates}", markup=False)
        return 0
    options = AdaptOptions(max_time_s=args.max_time)
    status = console.status("")
    done = 0

    def started(job) -> None:
        status.update(f"[{done + 1}/{len(jobs)}] racing {job.label}")

    def finished(result) -> None:
        nonlocal done
        done += 1
        _print_adapted(console, f"[{done}/{len(jobs)}]", result)

    with TuningDB(args.db) as db, status:
        results = adapt(jobs, target, output, db, options, on_start=started, on_result=finished)
    written = sum(r.entry is not None for r in results)
    console.print(f"wrote {plural(written, 'entry')} to {output}", markup=False)
    return 0 if written == len(results) else 1


def _print_adapted(console, step: str, result) -> None:
    """One line per workload (candidates, winner, speedup), then any candidate dropped."""
    names = ", ".join(c.name for c in result.contenders) or "-"
    line = f"{step} {result.job.label}: {names}"
    if result.verdict is not None and result.winner is not None:
        verdict = "beat the selector in every round" if result.verdict.won else "selector stands"
        line += f" -> {result.winner.name} {result.verdict.speedup:.3f}x ({verdict})"
    else:
        line += f" -> error: {result.error}"
    console.print(line, markup=False)
    for contender in result.contenders:
        if contender.status != "ok":
            detail = " ".join(contender.detail.split())[:200]
            console.print(
                f"    {contender.name} skipped: {contender.status}: {detail}", markup=False
            )
    if result.note:
        console.print(f"    note: {result.note}", markup=False)
