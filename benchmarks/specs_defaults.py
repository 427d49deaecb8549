"""The shipped default spec library against the untuned selector and numpy (one BLAS thread),
all measured side by side in one run.

    python benchmarks/specs_defaults.py [--rounds 3] [--max-time 0.3] [--only SUBSTRING]
                                        [--library PATH] [--json PATH] [--isa avx2]

For every entry of the library (default: the one shipped for this machine's target), the
entry's workload is timed with the library applied, with the selector's config (no specs)
and as numpy, in interleaved rounds (spec, selector, numpy, spec, ...) so that machine drift
hits all three alike; each side's time is the median of its per-round medians. Compare the
ratios within one run only. The last column is the speedup recorded in the entry.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, NoReturn

from mlir import ir

from mlirtune.api import engine_for
from mlirtune.bench.baseline import measure_numpy
from mlirtune.curation.export import rebuild_workload
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.ir.context import new_context
from mlirtune.specs.library import SpecLibrary
from mlirtune.specs.sources import fetch
from mlirtune.specs.specset import SpecSet, default_library_path
from mlirtune.targets import HostCPU

SIDES = ("spec", "selector", "numpy")


def read_entries(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(name, metadata) of every entry of the library at `path`."""
    with new_context(), ir.Location.unknown():
        library = SpecLibrary.parse(fetch(str(path)))
        return [(entry.name, dict(entry.metadata)) for entry in library.entries]


def shape(options: dict[str, Any]) -> str:
    """A short workload label: its name and dimensions (and dtype if not f32)."""
    dims = ",".join(f"{k}{v}" for k, v in options.items() if k[:1].isupper())
    dtype = options.get("dtype", "f32")
    return f"{options['name']} {dims}" + ("" if dtype == "f32" else f" {dtype}")


def measure(engines: dict, workload, rounds: int, max_time_s: float) -> dict[str, Any]:
    """Interleave spec, selector and numpy for `rounds` rounds (verifying the kernels in the
    first); per side, the median of the per-round medians, plus what each kernel ran with."""
    options = BenchOptions(max_time_s=max_time_s)
    times: dict[str, list[float]] = {side: [] for side in SIDES}
    runs: dict[str, Any] = {}
    for round_index in range(rounds):
        for side, engine in engines.items():
            result = engine.benchmark(workload, check_correctness=round_index == 0, options=options)
            times[side].append(result.median_s)
            runs[side] = result
        times["numpy"].append(measure_numpy(workload, options).median_s)
    flops = workload.get_complexity().flops
    seconds = {side: statistics.median(values) for side, values in times.items()}
    return {
        "median_s": seconds,
        "gflops": {side: flops / s / 1e9 for side, s in seconds.items()},
        "spec_vs_selector": seconds["selector"] / seconds["spec"],
        "spec_vs_numpy": seconds["numpy"] / seconds["spec"],
        "config_source": runs["spec"].extra.get("config_source"),
        "parameters": {side: runs[side].parameters for side in engines},
    }


def fail(message: str) -> NoReturn:
    """One line on stderr, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per entry")
    parser.add_argument("--max-time", type=float, default=0.3, help="seconds per measurement")
    parser.add_argument("--only", help="only entries whose name or workload contains this")
    parser.add_argument("--library", type=Path, help="library file (default: the shipped one)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--isa", help="benchmark as HostCPU(isa=ISA), e.g. avx2 on AVX-512")
    args = parser.parse_args()

    try:
        target = HostCPU(isa=args.isa) if args.isa else HostCPU()
    except MlirtuneError as error:
        fail(str(error))
    path = args.library or default_library_path(target)
    if path is None:
        name = target.spec_library_name() or f"{target.features.arch} {target.features.isa}"
        fail(f"no spec library is shipped for this target ({name}); use --library PATH")
    try:
        specs = SpecSet([fetch(str(path))], target) if args.library else None
        entries = read_entries(path)
    except MlirtuneError as error:
        fail(str(error).splitlines()[0])
    spec_engine = engine_for(target, specs=specs)
    engines = {"spec": spec_engine, "selector": engine_for(target, use_specs=False)}
    print(f"library: {path}; rounds: {args.rounds}, {args.max_time} s per measurement")

    rows, surprises = [], []
    labels = {name: shape(m["workload"]) if m.get("workload") else "?" for name, m in entries}
    name_w = max([len("entry"), *map(len, labels)])
    label_w = max([len("workload"), *map(len, labels.values())])
    header = (
        f"{'entry':{name_w}s} {'workload':{label_w}s} {'spec':>7s} {'select':>7s} {'numpy':>7s}"
    )
    print(f"{header} {'sp/sel':>7s} {'sp/np':>7s} {'recorded':>8s}  config  (GFLOP/s)")
    for name, metadata in entries:
        options = metadata.get("workload")
        label = labels[name]
        if args.only and args.only not in name and args.only not in label:
            continue
        if not options:
            surprises.append(f"{name}: no workload in its metadata, skipped")
            continue
        try:
            row = measure(engines, rebuild_workload(options), args.rounds, args.max_time)
        except MlirtuneError as error:
            surprises.append(f"{name}: {error}")
            continue
        row.update(entry=name, workload=options, recorded_speedup=metadata.get("speedup"))
        rows.append(row)
        source = row["config_source"] or "?"
        if not (source.startswith("spec:") and source.endswith(f":{name}")):
            surprises.append(f"{name}: config_source is {source}, not this entry")
        gflops, recorded = row["gflops"], row["recorded_speedup"]
        same = row["parameters"]["spec"] == row["parameters"]["selector"]
        print(
            f"{name:{name_w}s} {label:{label_w}s} {gflops['spec']:7.1f} {gflops['selector']:7.1f} "
            f"{gflops['numpy']:7.1f} {row['spec_vs_selector']:6.2f}x {row['spec_vs_numpy']:6.2f}x "
            + (f"{recorded:7.2f}x" if recorded is not None else f"{'-':>8s}")
            + ("  =selector" if same else "  tuned"),
            flush=True,
        )
    geomeans = {
        key: statistics.geometric_mean(r[key] for r in rows) if rows else None
        for key in ("spec_vs_selector", "spec_vs_numpy")
    }
    if rows:
        print(
            f"{'geometric mean':{name_w + label_w + 25}s} {geomeans['spec_vs_selector']:6.2f}x "
            f"{geomeans['spec_vs_numpy']:6.2f}x   ({len(rows)} entries)"
        )
    for note in surprises:
        print(f"note: {note}", file=sys.stderr)
    if args.json:
        report = {"library": str(path), "rounds": args.rounds, "max_time_s": args.max_time}
        args.json.write_text(
            json.dumps({**report, "rows": rows, "geomean": geomeans}, indent=2) + "\n"
        )


if __name__ == "__main__":
    main()
