"""`python -m mlirtune.cli.gpu_run`: verify and time saved GPU programs on this machine's GPU.

It needs numpy, cuda-bindings and this package's source, not MLIR (nor the `mlirtune`
command's other subcommands, which import it): a GPU machine runs what a machine with MLIR
compiled (`mlirtune opt --target nvidia-gpu --program FILE.json`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mlirtune.cli.common import Parser, integer, seconds
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.interfaces.gpu_program import GpuProgram
from mlirtune.interfaces.runtime import Placement
from mlirtune.runtime.cuda import CudaDevice
from mlirtune.runtime.gpu_run import ProgramRun, load_data, run_program

EPILOG = """\
examples:
  python -m mlirtune.cli.gpu_run mm.json                  # verify against mm.npz, then time
  python -m mlirtune.cli.gpu_run a.json b.json --json     # one JSON object per program
  python -m mlirtune.cli.gpu_run mm.json --host-placement # time the transfers too
"""


def main(argv: list[str] | None = None) -> int:
    parser = Parser(
        prog="python -m mlirtune.cli.gpu_run",
        description="Verify saved GPU programs against the data beside them, then time "
        "them with CUDA events; needs no MLIR.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("programs", nargs="+", type=Path, help="saved GpuProgram .json files")
    parser.add_argument(
        "--device", type=integer(0), default=0, help="CUDA device index, >= 0 (default 0)"
    )
    parser.add_argument(
        "--max-time",
        type=seconds,
        default=2.0,
        metavar="S",
        help="time cap per program in seconds, > 0 (default: %(default)s)",
    )
    parser.add_argument(
        "--host-placement",
        action="store_true",
        help="time the inputs' upload and the outputs' download in every call (default: "
        "every argument is on the device before timing starts)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per program")
    args = parser.parse_args(argv)
    try:  # every file read before the device is asked for: bad input fails first
        programs = [(path, GpuProgram.load(path)) for path in args.programs]
        device = CudaDevice(args.device)
        placement = Placement.HOST if args.host_placement else Placement.DEVICE
        options = BenchOptions(max_time_s=args.max_time)
        failed = False
        for path, program in programs:
            data = load_data(path)
            run = run_program(device, program, data, options, placement)
            failed |= run.verification is not None and not run.verification.ok
            print(json.dumps(run.summary()) if args.json else _line(path, device, run))
    except MlirtuneError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    return 1 if failed else 0


def _line(path: Path, device: CudaDevice, run: ProgramRun) -> str:
    summary = run.summary()
    if run.verification is None:
        check = "not verified (no data)"
    elif run.verification.ok:
        check = f"verified (max abs error {run.verification.max_abs_error:.2e})"
    else:
        check = f"WRONG: {run.verification.summary()}"
    return (
        f"{path.name} on {device.model}: {check}; {summary['median_s'] * 1e3:.4f} ms "
        f"(cv {summary['cv']:.1%}, {summary['samples']} samples), "
        f"{summary['gflops']:.1f} GFLOP/s"
    )


if __name__ == "__main__":
    sys.exit(main())
