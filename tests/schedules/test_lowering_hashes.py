"""A fixed set of workloads, one or more per schedule family, lowered for two CPU classes on
one and two threads: the selected config and the lowered module's text must hash as
recorded. A refactoring that moves code must leave every hash as it was; a change meant to
alter kernels records the new hashes:

    MLIRTUNE_RECORD_HASHES=1 pytest tests/schedules/test_lowering_hashes.py

and says in its commit which hashes changed and why.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from mlirtune.engine import MlirJitEngine
from mlirtune.workloads import workload_class
from tests.cpu_classes import cpu
from tests.targets.test_every_cpu_class import CASES, THREADED

pytestmark = pytest.mark.jit

RECORD = Path(__file__).with_name("lowering_hashes.json")
CLASSES = ("avx2", "amx")


def _keys():
    for name, options in CASES:
        label = "-".join([name, *(f"{k}{v}" for k, v in options.items())])
        for threads in (1, 2) if name in THREADED else (1,):
            for cpu_class in CLASSES:
                yield f"{label}-t{threads}-{cpu_class}", name, options, threads, cpu_class


KEYS = list(_keys())


def _digest(name: str, options: dict[str, str], threads: int, cpu_class: str) -> str:
    """The selected values and the lowered module, hashed together."""
    engine = MlirJitEngine(target=cpu(cpu_class, threads), use_specs=False)
    workload = workload_class(name).from_strings(options)
    values = engine.plan(workload).values
    module = engine.lower_payload(workload)
    with module.context:
        text = module.operation.get_asm(print_generic_op_form=True)
    body = json.dumps(sorted(values.items())) + "\n" + text
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def test_the_record_covers_every_case():
    if os.environ.get("MLIRTUNE_RECORD_HASHES"):
        pytest.skip("recording")
    recorded = json.loads(RECORD.read_text())
    assert sorted(recorded) == sorted(key for key, *_ in KEYS)


@pytest.mark.parametrize(
    ("key", "name", "options", "threads", "cpu_class"), KEYS, ids=[k[0] for k in KEYS]
)
def test_lowered_modules_hash_as_recorded(key, name, options, threads, cpu_class):
    digest = _digest(name, options, threads, cpu_class)
    if os.environ.get("MLIRTUNE_RECORD_HASHES"):
        recorded = json.loads(RECORD.read_text()) if RECORD.exists() else {}
        recorded[key] = digest
        RECORD.write_text(json.dumps(dict(sorted(recorded.items())), indent=1) + "\n")
        return
    assert json.loads(RECORD.read_text()).get(key) == digest, key
