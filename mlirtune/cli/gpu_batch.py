"""`python -m mlirtune.cli.gpu_batch DIR`: time a device batch of tuning candidates here.

It needs numpy, cuda-bindings and this package's source, not MLIR: the batch was compiled
elsewhere by `mlirtune tune ... --target nvidia-gpu --export-batch DIR`, and its results go
back there through `--import-batch DIR`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from mlirtune.cli.common import Parser, integer
from mlirtune.interfaces.device_batch import RACE, DeviceBatch, read_results
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.runtime.gpu_batch import OnResult, device_command, run_batch

EPILOG = """\
examples:
  python -m mlirtune.cli.gpu_batch batch/             # every candidate, then the race
  python -m mlirtune.cli.gpu_batch batch/ --device 1

Each candidate is verified against the batch's data, then timed with CUDA events. One that
faults the GPU context or hangs (past the batch's timeout) is recorded as a crash or a
timeout, and a fresh device process goes on with the next. Results are appended to
DIR/results.jsonl as they come: run the same command again after an interruption to go on
where it stopped. The fastest candidates then race the baseline in interleaved rounds
(DIR/race.json).
"""


def main(argv: list[str] | None = None) -> int:
    parser = Parser(
        prog="python -m mlirtune.cli.gpu_batch",
        description="Verify and time a batch of tuning candidates on this machine's GPU, "
        "then race the fastest against the baseline; needs no MLIR.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("directory", type=Path, help="a folder written by --export-batch")
    parser.add_argument(
        "--device", type=integer(0), default=0, help="CUDA device index, >= 0 (default 0)"
    )
    args = parser.parse_args(argv)
    try:
        batch = DeviceBatch.load(args.directory)
        _, done = read_results(args.directory)
        print(f"{len(batch.candidates)} candidates, {len(done)} already measured")
        started = time.monotonic()
        results = run_batch(args.directory, device_command(args.device), _reporter(batch))
        elapsed = time.monotonic() - started
    except MlirtuneError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    measured = len(results) - len(done)
    statuses = dict(Counter(result["status"] for result in results.values()))
    rate = measured / elapsed if elapsed > 0 else 0.0
    print(f"{measured} candidates in {elapsed:.1f} s ({rate:.2f} candidates/s); {statuses}")
    _print_race(batch, args.directory)
    return 0


def _reporter(batch: DeviceBatch) -> OnResult:
    """Prints each candidate's result as it comes."""

    def report(index: int, result: dict[str, Any]) -> None:
        parameters = batch.candidates[index].parameters
        if result["samples"]:
            median = float(np.median(result["samples"]))
            what = f"{median * 1e3:.4f} ms, {batch.flops / median / 1e9:.1f} GFLOP/s"
        else:
            what = f"{result['status']}: {result['detail'][:200]}"
        print(f"[{index + 1}/{len(batch.candidates)}] {parameters}: {what}", flush=True)

    return report


def _print_race(batch: DeviceBatch, directory: Path) -> None:
    """Each contender's median per round, its speedup over the baseline and its wins."""
    race = json.loads((directory / RACE).read_text())
    if not race.get("samples"):
        print(f"no race: {race.get('failed') or race.get('detail')}")
        return
    rounds = [[float(np.median(r)) for r in samples] for samples in race["samples"]]
    base = np.asarray(rounds[0])
    print("race (median ms per round; the baseline first):")
    for index, medians in zip(race["indices"], rounds, strict=True):
        ratio = float(np.median(base) / np.median(medians))
        won = int((np.asarray(medians) < base).sum())
        verdict = f"faster in {won}/{len(medians)} rounds" if index else "the baseline"
        print(
            f"  {index:3d} {batch.candidates[index].parameters}: "
            f"{' '.join(f'{m * 1e3:.4f}' for m in medians)}  x{ratio:.3f}, {verdict}"
        )


if __name__ == "__main__":
    sys.exit(main())
