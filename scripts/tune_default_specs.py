"""Tune the shapes the shipped default spec libraries cover, then export each library.

    python scripts/tune_default_specs.py --isa avx512 --db /tmp/defaults.db
    python scripts/tune_default_specs.py --isa avx2 --db /tmp/defaults.db --export-only

Every shape is tuned with mlirtune's own tuner on this machine (the target's ISA can be
lowered, e.g. avx2 on an AVX-512 host, which tunes 8-lane vectors and fewer shapes); records
and verdicts go to --db, so an interrupted run resumes. The library is then written from the
verdicts to mlirtune/specs/defaults/x86_64-<isa>-<class>.mlir, named after this machine's
CPU class (e.g. amd-zen4): compiles apply it on CPUs of that class only.
"""

from __future__ import annotations

import argparse
import sys
import time

from mlir import ir

from mlirtune.curation.export import export_library
from mlirtune.ir.context import new_context
from mlirtune.specs.specset import DEFAULTS_DIR
from mlirtune.targets import HostCPU
from mlirtune.tune.db import TuningDB
from mlirtune.tune.problem import generate
from mlirtune.tune.tuner import TuneOptions, tune
from mlirtune.workloads import workload_class

SQUARE = [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024)]
RECTANGULAR = [(256, 1024, 512), (1024, 256, 1024), (128, 512, 2048)]
MLP = [(256, 1024, 1024), (128, 512, 256)]
CONV2D = [(58, 58, 64, 64), (30, 30, 128, 128), (16, 16, 256, 256)]

SHAPES = [
    *(("matmul", dict(M=m, N=n, K=k)) for m, n, k in SQUARE + RECTANGULAR),
    *(("mlp", dict(M=m, N=n, K=k)) for m, n, k in MLP),
    *(("conv2d", dict(H=h, W=w, C=c, F=f)) for h, w, c, f in CONV2D),
]
# A library tuned for an ISA below the host's (avx2 on an AVX-512 host) stands in for
# hosts of that class that lack the wider ISA: the first shapes only.
LOWERED_SHAPES = [
    *(("matmul", dict(M=m, N=n, K=k)) for m, n, k in SQUARE),
    *(("mlp", dict(M=m, N=n, K=k)) for m, n, k in MLP[:1]),
    *(("conv2d", dict(H=h, W=w, C=c, F=f)) for h, w, c, f in CONV2D[:1]),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--isa", choices=["avx2", "avx512"], required=True)
    parser.add_argument("--db", required=True, help="tuning database (resumable)")
    parser.add_argument("--budget", type=int, default=40, help="candidates per shape")
    parser.add_argument("--strategy", default="model")
    parser.add_argument("--export-only", action="store_true", help="skip tuning")
    args = parser.parse_args()
    target = HostCPU(isa=args.isa)
    shapes = SHAPES if HostCPU().features.isa == args.isa else LOWERED_SHAPES
    options = TuneOptions(budget=args.budget, strategy=args.strategy)
    with TuningDB(args.db) as db:
        for index, (name, dims) in enumerate(shapes):
            if args.export_only:
                break
            workload = workload_class(name)(**dims)
            started = time.monotonic()
            report = tune(generate(workload, target), options, db)
            print(
                f"[{index + 1}/{len(shapes)}] {name} {dims}: "
                f"{report.speedup:.3f}x over the selector "
                f"({'winner' if report.winner else 'baseline stood'}) "
                f"in {time.monotonic() - started:.0f} s",
                flush=True,
            )
        name = f"{target.spec_library_name()}-{target.hardware_class()}"
        with new_context(), ir.Location.unknown():
            library = export_library(db, target, name)
            path = library.save(DEFAULTS_DIR / f"{name}.mlir")
        print(f"wrote {len(library.entries)} entries to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
