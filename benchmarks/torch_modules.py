"""The PyTorch examples (examples/torch) as mlirtune runs them, against PyTorch eager and
torch.compile, f32, measured side by side in one run, on one thread unless --threads
says otherwise (both sides then run on as many).

    PYTHONPATH=benchmarks python benchmarks/torch_modules.py [--budget 40] [--rounds 3]
        [--threads 2]

With --budget N, each example is first tuned dispatch by dispatch (`mlirtune tune --torch
... --budget N --update-spec`, into a temporary library), and the tuned column applies that
library; without it only the untuned column (selectors, shipped libraries) is measured.
Rounds alternate ours and PyTorch's; each side's time is the median of its round medians.
torch.compile is said to be unavailable (with the reason) where it fails on this host.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from torch_models import side_by_side

from mlirtune.api import engine_for
from mlirtune.cli import main as mlirtune_main
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.specs.specset import SpecSet
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.torch.factory import workload_from_factory

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "torch"
NAMES = ("mlp_block", "resnet_block", "encoder_layer")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--budget", type=int, default=0, help="tune each dispatch first")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-time", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=1, help="threads of both sides")
    args = parser.parse_args()
    target = HostCPU(threads=args.threads)
    options = BenchOptions(max_time_s=args.max_time)
    folder = Path(tempfile.mkdtemp(prefix="mlirtune-torch-modules-"))
    print(f"{'example':15s} {'ours ms':>9s} {'eager ms':>9s} {'vs eager':>9s} {'compile':>12s}")
    for name in NAMES:
        factory = f"{EXAMPLES / name}.py:make"
        workload = workload_from_factory(factory)
        specs = None
        if args.budget:
            library = folder / f"{name}.mlir"
            tune = ["tune", "--torch", factory, "--budget", str(args.budget)]
            tune += ["--threads", str(args.threads)]
            mlirtune_main([*tune, "--update-spec", str(library), "--db", str(folder / "t.db")])
            specs = SpecSet.for_target(target, [str(library)])
        engine = engine_for(target, specs=specs)
        times = side_by_side(engine, workload, options, args.rounds, target.threads)
        shown = (
            f"{times.eager / times.compiled:.2f}x eager"
            if times.compiled is not None
            else f"n/a ({times.compile_error})"
        )
        print(
            f"{name:15s} {times.ours * 1e3:9.3f} {times.eager * 1e3:9.3f} "
            f"{times.eager / times.ours:8.2f}x {shown:>12s}"
        )


if __name__ == "__main__":
    main()
