"""A device process for tests of the batch supervisor, with no GPU: it measures a
candidate as 1 / (block_m * block_n) seconds (bigger tiles are faster), and aborts (as a
fault kills a real one), hangs or computes a wrong result on the candidates that
$FAKE_FAULT, $FAKE_HANG and $FAKE_WRONG name. Each measurement is logged to $FAKE_LOG."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from mlirtune.runtime.gpu_batch import main


def _chosen(variable: str) -> set[int]:
    return {int(i) for i in os.environ.get(variable, "").split(",") if i}


class FakeMeasurer:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def fingerprint(self) -> dict[str, Any]:
        return {"gpu": "Fake GPU", "chip": "sm_90", "driver": 13000}

    def _seconds(self, program: Path) -> float:
        parameters = json.loads(program.read_text())["parameters"]
        return 1.0 / (parameters["block_m"] * parameters["block_n"])

    def measure(self, program: Path) -> dict[str, Any]:
        index = int(program.stem.removeprefix("candidate-"))
        with open(os.environ["FAKE_LOG"], "a") as log:
            log.write(f"{index}\n")
        if index in _chosen("FAKE_FAULT"):
            os.abort()
        if index in _chosen("FAKE_HANG"):
            time.sleep(3600)
        if index in _chosen("FAKE_WRONG"):
            return {"status": "wrong_result", "detail": "C: 7 of 9 elements differ"}
        return {"status": "ok", "samples": [self._seconds(program)] * 10}

    def race(self, programs: list[Path], rounds: int) -> list[list[list[float]]]:
        return [[[self._seconds(p)] * 20 for _ in range(rounds)] for p in programs]


if __name__ == "__main__":
    main(measurer=FakeMeasurer)
