"""What contained compiles cost a command: wall time of `mlirtune run` and `mlirtune bench`
on a small workload through the console script (a supervisor forks the command, compiles
run under limits) against the same command run by `main()` in-process (no supervisor, no
limits), in alternating rounds so that machine drift hits both sides alike.

    python benchmarks/containment_overhead.py [--rounds 10]

Prints, per command, the median wall time of each side and their ratio (contained over
direct; the target is at most 1.10).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORKLOAD = ["matmul", "M=256", "N=256", "K=256", "--no-specs"]
COMMANDS = {
    "run": ["run", *WORKLOAD],
    "bench": ["bench", *WORKLOAD, "--max-time", "0.2"],
}
DIRECT = "import sys; from mlirtune.cli import main; sys.exit(main(sys.argv[1:]))"


def wall(argv: list[str]) -> float:
    """Seconds one command takes, start to exit; it must succeed."""
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds per side (default 10)")
    args = parser.parse_args()
    script = Path(sys.executable).with_name("mlirtune")
    for name, command in COMMANDS.items():
        contained = [str(script), *command]
        direct = [sys.executable, "-c", DIRECT, *command]
        wall(contained), wall(direct)  # warm the file cache
        times: dict[str, list[float]] = {"contained": [], "direct": []}
        for round_ in range(args.rounds):
            order = ("contained", "direct") if round_ % 2 == 0 else ("direct", "contained")
            for side in order:
                times[side].append(wall(contained if side == "contained" else direct))
        ours, theirs = statistics.median(times["contained"]), statistics.median(times["direct"])
        print(
            f"{name:6s} contained {ours:6.3f} s  direct {theirs:6.3f} s  "
            f"ratio {ours / theirs:5.3f} ({args.rounds} rounds each)"
        )


if __name__ == "__main__":
    main()
