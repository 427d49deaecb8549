"""Real models (examples/models: torchvision, timm and transformers, built without weights)
as mlirtune runs them, against PyTorch eager and torch.compile (inductor), f32, measured
side by side in one run, at each batch size of --batch, on --threads threads (both sides).

    PYTHONPATH=benchmarks python benchmarks/torch_models.py [--batch 1,8] [--threads 1]
        [--rounds 3] [--budget N] [MODEL.py ...]

Rounds alternate ours, eager and compiled; each side's time is the median of its round
medians. With --budget N, each model is first tuned dispatch by dispatch (`mlirtune tune
--torch FILE --budget N --update-spec`, into a temporary library) and ours applies it. A
model that fails to import or verify is listed with its error; the geometric means are
over the models that ran.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mlirtune.api import engine_for
from mlirtune.bench.baseline import measure_torch
from mlirtune.cli import main as mlirtune_main
from mlirtune.contain.supervisor import call_contained
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.engine import Engine
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.workload import Workload
from mlirtune.specs.specset import SpecSet
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.torch.factory import workload_from_factory

MODELS = Path(__file__).resolve().parents[1] / "examples" / "models"


@dataclass
class SideBySide:
    """Median seconds per call of each side; compiled is None where torch.compile failed."""

    ours: float
    eager: float
    compiled: float | None
    compile_error: str = ""


def side_by_side(
    engine: Engine, workload: Workload, options: BenchOptions, rounds: int, threads: int
) -> SideBySide:
    """Ours, eager and torch.compile in alternating rounds (ours is verified first)."""
    ours, eager, compiled = [], [], []
    compile_error = ""
    for _ in range(rounds):
        ours.append(engine.benchmark(workload, options=options).median_s)
        eager.append(measure_torch(workload, options, threads=threads).median_s)
        if compile_error:
            continue
        try:
            compiled.append(measure_torch(workload, options, threads, compiled=True).median_s)
        except UsageError as error:
            compile_error = str(error.args[0])
    return SideBySide(
        statistics.median(ours),
        statistics.median(eager),
        statistics.median(compiled) if compiled else None,
        compile_error,
    )


def measure_model(
    path: Path,
    batch: int,
    budget: int,
    target: HostCPU,
    options: BenchOptions,
    rounds: int,
    folder: Path,
) -> SideBySide:
    """The model file at `batch`, tuned first with `budget` (0: untuned), side by side."""
    workload = workload_from_factory(str(path), batch)
    specs = tuned_specs(str(path), batch, budget, target, folder) if budget else None
    engine = engine_for(target, specs=specs)
    return side_by_side(engine, workload, options, rounds, target.threads)


def tuned_specs(factory: str, batch: int, budget: int, target: HostCPU, folder: Path) -> SpecSet:
    """A library of `factory`'s dispatches tuned with `budget` candidates in all, shared out
    by their share of its time."""
    library = folder / f"{Path(factory).stem}-{batch}.mlir"
    tune = ["tune", "--torch", factory, "--batch", str(batch), "--budget", str(budget)]
    tune += ["--threads", str(target.threads), "--db", str(folder / "tuning.db")]
    mlirtune_main([*tune, "--update-spec", str(library)])
    return SpecSet.for_target(target, [str(library)])


def geometric_mean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("models", nargs="*", type=Path, help="model files (default: all)")
    parser.add_argument("--batch", default="1,8", help="batch sizes, comma-separated")
    parser.add_argument("--threads", type=int, default=1, help="threads of every side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-time", type=float, default=0.5)
    parser.add_argument(
        "--budget", type=int, default=0, help="tune each model first, N candidates in all"
    )
    args = parser.parse_args()
    files = args.models or sorted(MODELS.glob("*.py"))
    target = HostCPU(threads=args.threads)
    options = BenchOptions(max_time_s=args.max_time)
    folder = Path(tempfile.mkdtemp(prefix="mlirtune-torch-models-"))
    vs_eager, vs_compiled = [], []
    print(f"threads: {args.threads}; ratios above 1: mlirtune is faster")
    print(f"{'model':20s} {'batch':>5s} {'ours ms':>9s} {'eager ms':>9s} {'vs eager':>9s} "
          f"{'vs compile':>10s}")  # fmt: skip
    for path in files:
        for batch in (int(b) for b in args.batch.split(",")):
            try:
                # In a child of its own: a model that aborts in C++ is its row's failure.
                times = call_contained(
                    measure_model, path, batch, args.budget, target, options, args.rounds, folder
                )
            except MlirtuneError as error:
                print(f"{path.stem:20s} {batch:5d} failed: {str(error).splitlines()[0]}")
                continue
            vs_eager.append(times.eager / times.ours)
            compile_ratio = "n/a"
            if times.compiled is not None:
                vs_compiled.append(times.compiled / times.ours)
                compile_ratio = f"{vs_compiled[-1]:.2f}x"
            print(
                f"{path.stem:20s} {batch:5d} {times.ours * 1e3:9.3f} {times.eager * 1e3:9.3f} "
                f"{vs_eager[-1]:8.2f}x {compile_ratio:>10s}",
                flush=True,
            )
    print(
        f"geometric mean: {geometric_mean(vs_eager):.2f}x eager over {len(vs_eager)} "
        f"(lowest {min(vs_eager, default=float('nan')):.2f}x), "
        f"{geometric_mean(vs_compiled):.2f}x torch.compile over {len(vs_compiled)}"
    )


if __name__ == "__main__":
    main()
