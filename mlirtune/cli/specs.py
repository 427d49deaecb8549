"""`mlirtune specs`: export, list, verify, merge and explain tuning-spec libraries."""

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
    target_of,
    workload_of,
)
from mlirtune.ir.context import new_context

EPILOG = """\
examples:
  mlirtune specs export --db tuning.db -o my-specs.mlir
  mlirtune specs export --db tuning.db --workload matmul -o matmuls.mlirbc
  mlirtune specs list
  mlirtune specs list my-specs.mlir
  mlirtune specs verify my-specs.mlir
  mlirtune specs merge mine.mlir team.mlir -o merged.mlir
  mlirtune specs show --for matmul M=512 N=512 K=512

A spec library is a transform module: each entry is a matcher (op name, loop sizes, element
widths, multiply-add body, M/N/K loops, convolution strides) and an action that annotates the
matched op with its tuned config. Compiles (run, bench, opt, the engine API) apply, in order:
--spec libraries, $MLIRTUNE_SPECS (a path list), $XDG_CONFIG_HOME/mlirtune/specs/, then the
defaults shipped for the target; the first matching entry tuned for the pipeline wins and the
parameter selector decides where none matches. An entry tuned on another CPU or toolchain
applies if its config is valid here, and is skipped otherwise: with a warning for your own
libraries, as a note in the compile's provenance (bench's `note:` lines) for the shipped ones.
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
    export.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="LIB.mlir|LIB.mlirbc",
        help="library to write (replaced if it exists; to add to a library, use "
        "`mlirtune tune --update-spec LIB`)",
    )
    add_target_argument(export)
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


def _libraries(names: list[str], target) -> list:
    """`names` parsed in order (inside an MLIR context); none: the libraries compiles apply."""
    from mlirtune.specs.specset import SpecSet

    if not names:
        return SpecSet.for_target(target).libraries()
    return SpecSet.for_target(target, names, configured=False, defaults=False).libraries()


def _export(args: argparse.Namespace) -> int:
    from mlirtune.specs.export import export_library
    from mlirtune.tune.db import TuningDB

    target = target_of(args)
    with new_context(), ir.Location.unknown(), TuningDB(args.db, readonly=True) as db:
        library = export_library(db, target, Path(args.output).stem, workloads=args.workload)
        path = library.save(args.output)
        print(f"wrote {plural(len(library.entries), 'entry')} to {path}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from mlirtune.specs.specset import stale_reasons

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
                if stale:
                    print(f"  {'':44s} stale: tuned {stale}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from mlirtune.specs.check import check

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
        if report.stale:
            verdict = (
                f"not applied: breaks {', '.join(report.broken)}"
                if report.broken
                else "applies (valid here)"
            )
            print(f"  stale  {report.label}: tuned {'; '.join(report.stale)}; {verdict}")
    bad = [r for r in reports if not r.ok]
    overlaps = [r for r in reports if r.shadowed_by]
    print(f"{plural(len(reports), 'entry')}: {len(bad)} with problems, {len(overlaps)} shadowed")
    return 1 if bad else 0


def _merge(args: argparse.Namespace) -> int:
    from mlirtune.specs.check import check
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
    from mlirtune.ir.roots import annotate_roots
    from mlirtune.specs.merge import probe

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
                    print(f"  matches {library.name}:{name}{why}")
                if not hits:
                    print(f"  no entry of {library.name} ({library.origin}) matches")
    source = lowering.config_source
    values = " ".join(f"{k}={v}" for k, v in lowering.values.items())
    print(f"config: {source}: {values}")
    if source in ("selector", "descriptor", "default") and specs is not None:
        print("  (no entry for this pipeline matched, or a stale one was skipped)")
    return 0
