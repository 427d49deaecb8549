"""The shipped kernelbench-l1 suite: one entry per covered problem, each naming its problem
number, and every entry's workload builds and plans for this host (nothing is compiled)."""

from __future__ import annotations

import re

from mlirtune.pipeline.plan import plan_for
from mlirtune.suite.definition import load_suite
from mlirtune.targets.host_cpu import HostCPU

ENTRY = re.compile(r"^kb(\d{3})-[a-z0-9-]+$")


def test_entries_name_distinct_problems():
    suite = load_suite("kernelbench-l1")
    numbers = [int(ENTRY.match(entry.name).group(1)) for entry in suite.entries]
    assert len(set(numbers)) == len(numbers)
    assert all(1 <= n <= 100 for n in numbers)
    assert all({"torch", "numpy"} <= set(entry.baselines) for entry in suite.entries)


def test_every_entry_builds_and_plans():
    target = HostCPU()
    for entry in load_suite("kernelbench-l1").entries:
        workload = entry.build()
        lowering = plan_for(workload, target)
        assert lowering.descriptor.name, entry.name
