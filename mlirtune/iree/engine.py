"""The IREE engine: a workload compiled by `iree-compile` for llvm-cpu, run on IREE's
local-sync runtime (one thread), verified and timed like the MLIR JIT engine's kernels.

Schedule parameters are the lowering-config knobs (mlirtune/iree/tiles.py) of one dispatch,
the tuned root: a config other than IREE's own is handed to `iree-compile` as a one-entry
tuning spec. A spec library (`spec`) applies to every compile, as IREE's users apply it.
Bound to a dispatch with `time_dispatch`, as the tuner's workers are, a benchmark verifies
the whole module and times that dispatch alone, inside the module's runs
(mlirtune/iree/profile.py).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import numpy as np

from mlirtune.bench.harness import (
    NativeTimer,
    run_benchmark,
    running,
    verified_call,
    verify_then_time,
)
from mlirtune.bench.result import bench_result
from mlirtune.interfaces.bench import BenchOptions, BenchResult
from mlirtune.interfaces.engine import Engine, ExecutionResult
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.lowering import Lowering
from mlirtune.interfaces.runtime import Buffer
from mlirtune.interfaces.workload import Complexity, Workload
from mlirtune.iree.payload import tensor_payload
from mlirtune.iree.profile import DispatchTimer, time_shares
from mlirtune.iree.tiles import IREE_DEFAULT, KNOBS, PIPELINES, IreeRoot, lowering_config
from mlirtune.iree.tools import iree_compile, require_iree, spec_tool
from mlirtune.memory import check_memory
from mlirtune.runtime.host import HostRuntime
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.toolchain import IREE_PACKAGES, digest, toolchain_versions

Config = dict[str, int]
DUMP_FLAGS = ("--iree-codegen-add-tuner-attributes", "--compile-to=executable-configurations")


class IreeKernel:
    """One compiled module, loaded on a local-sync device, and its entry function; its
    files (module.vmfb, the values of a profiled run) live in `folder`. With `timed`, its
    timer times that dispatch alone (profile.DispatchTimer), else whole calls."""

    def __init__(self, folder: Path, entry: str, outputs: list[int], timed: str | None) -> None:
        import iree.runtime as runtime

        self.config = runtime.Config("local-sync")
        vmfb = (folder / "module.vmfb").read_bytes()
        module = runtime.VmModule.copy_buffer(self.config.vm_instance, vmfb)
        self.context = runtime.SystemContext(vm_modules=[module], config=self.config)
        self.function = self.context.modules.module[entry]
        self.entry = entry
        self.outputs = outputs  # the positions of the output arguments
        self.folder = folder
        self.timed = timed

    def timer(self, buffers: list[Buffer]) -> NativeTimer:
        """Whole calls (`calls`), or with `timed`, the calls of that dispatch."""
        if self.timed is None:
            return self.calls(buffers)
        return DispatchTimer(
            self.folder / "module.vmfb", self.entry, self.inputs(buffers), self.timed
        )

    def calls(self, buffers: list[Buffer]) -> NativeTimer:
        """Calls on `buffers` uploaded once; each timed sample covers `iterations` calls.
        The last call's results are copied into the output buffers."""
        import iree.runtime as runtime

        arguments = [runtime.asdevicearray(self.config.device, b.host) for b in buffers]

        def timer(iterations: int, samples: int) -> np.ndarray:
            times = np.empty(samples, dtype=np.int64)
            for sample in range(samples):
                start = time.perf_counter_ns()
                for _ in range(iterations):
                    results = self.function(*arguments)
                times[sample] = time.perf_counter_ns() - start
            results = results if isinstance(results, tuple | list) else (results,)
            for position, result in zip(self.outputs, results, strict=True):
                buffers[position].host[...] = result.to_host()
            return times

        return timer

    def time_shares(self, buffers: list[Buffer]) -> dict[str, float]:
        """Each dispatch's share of the module's dispatch time, on `buffers`."""
        return time_shares(self.folder / "module.vmfb", self.entry, self.inputs(buffers))

    def inputs(self, buffers: list[Buffer]) -> list[Path]:
        """`buffers` saved for IREE's tools, in argument order."""
        paths = [self.folder / f"argument{position}.npy" for position in range(len(buffers))]
        for path, buffer in zip(paths, buffers, strict=True):
            np.save(path, buffer.host)
        return paths


class IreeEngine(Engine):
    """Compiles with `iree-compile` (llvm-cpu, this host's CPU) and runs on local-sync."""

    def __init__(
        self,
        target: HostCPU | None = None,
        spec: Path | None = None,
        dispatch: str | None = None,
        time_dispatch: bool = False,
    ) -> None:
        require_iree()
        super().__init__(HostRuntime())
        self.target = target or HostCPU()
        self.spec = spec
        self.dispatch = dispatch  # the dispatch schedule parameters set: default, the costliest
        self.time_dispatch = time_dispatch  # benchmarks time that dispatch, not the module
        self._folder = tempfile.TemporaryDirectory(prefix="mlirtune-iree-")
        self._kernels: dict[str, IreeKernel] = {}
        self._roots: dict[str, list[IreeRoot]] = {}

    # --- dispatches -------------------------------------------------------------------

    def dispatches(self, workload: Workload) -> list[IreeRoot]:
        """Each dispatch IREE forms of `workload`, with its root op (read from the
        configurations `iree-compile` dumps), in dispatch order; with a spec, compiled with
        it, each root saying whether the spec set its config."""
        key = _key(workload)
        if key not in self._roots:
            dumps = Path(self._folder.name) / f"dispatches-{key[:16]}"
            dumps.mkdir()
            spec = [f"--iree-codegen-tuning-spec-path={self.spec}"] if self.spec else []
            iree_compile(
                self._source(workload),
                Path(os.devnull),  # only the dumped configurations are read
                *DUMP_FLAGS,
                *spec,
                f"--iree-hal-dump-executable-configurations-to={dumps}",
            )
            files = [str(f) for f in sorted(dumps.glob("*.mlir"), key=_dispatch_order)]
            with_spec = ["--spec", str(self.spec)] if self.spec else []
            found = json.loads(spec_tool("roots", *with_spec, *files)) if files else []
            self._roots[key] = [IreeRoot.from_json(f) for f in found if f.get("root")]
        return self._roots[key]

    def tuned_root(self, workload: Workload) -> IreeRoot:
        """The dispatch whose knobs schedule parameters set: the one named `dispatch`, else
        the workload's costliest by its loops (the first tunable root of the largest
        product)."""
        tunable = [root for root in self.dispatches(workload) if root.tunable]
        named = [root for root in tunable if root.dispatch == self.dispatch]
        if self.dispatch is not None and not named:
            raise UsageError(
                f"{workload.name}: no tunable dispatch named {self.dispatch} "
                f"({', '.join(r.dispatch for r in tunable) or 'none'})",
                stage="iree",
            )
        if named:
            return named[0]
        if not tunable:
            raise UsageError(
                f"{workload.name}: IREE forms no contraction dispatch of it to tune "
                f"({', '.join(r.describe() for r in self.dispatches(workload)) or 'none'})",
                stage="iree",
            )
        return max(tunable, key=lambda root: int(np.prod(root.loops)))

    # --- compiling ----------------------------------------------------------------------

    def compile(self, workload: Workload, schedule_parameters: Config | None = None) -> IreeKernel:
        """The module compiled with IREE's own config or with `schedule_parameters` for the
        tuned root; cached per (workload, parameters)."""
        config = schedule_parameters or IREE_DEFAULT
        if sorted(config) != sorted(KNOBS):
            raise UsageError(
                f"IREE's knobs are {', '.join(KNOBS)} (all of them, or none for IREE's own "
                f"config); got {', '.join(sorted(config)) or 'none'}",
                stage="iree",
            )
        key = json.dumps([_key(workload), sorted(config.items())])
        if key not in self._kernels:
            folder = Path(tempfile.mkdtemp(dir=self._folder.name))
            spec = self.spec
            if any(config.values()):
                spec = folder / "spec.mlir"
                self.write_spec([(self.tuned_root(workload), config)], spec)
            flags = [f"--iree-codegen-tuning-spec-path={spec}"] if spec else []
            iree_compile(self._source(workload), folder / "module.vmfb", *flags)
            timed = self.tuned_root(workload).dispatch if self.time_dispatch else None
            self._kernels[key] = IreeKernel(folder, workload.entry, _outputs(workload), timed)
        return self._kernels[key]

    def write_spec(
        self, entries: list[tuple[IreeRoot, Config]], path: Path, merged: Path | None = None
    ) -> None:
        """A tuning spec setting each root's config, written by the spec tool; with
        `merged`, the other dispatches' matchers of that earlier spec are kept."""
        listed = [
            {
                "file": root.file,
                "lowering_config": lowering_config(root, config),
                "translation_info": PIPELINES[root.kind or ""],
            }
            for root, config in entries
        ]
        entries_path = Path(self._folder.name) / "spec-entries.json"
        entries_path.write_text(json.dumps({"entries": listed, "tuned_on": self.tuned_on()}))
        spec_tool("spec", str(entries_path), str(path), *([str(merged)] if merged else []))

    def tuned_on(self) -> dict[str, str]:
        """The stamp of the specs this engine writes: the CPU class, CPU and IREE."""
        return {
            "class": self.target.hardware_class(),
            "cpu": str(self.target.fingerprint().get("model", "")),
            "iree": toolchain_versions(IREE_PACKAGES).get("iree-base-compiler", ""),
        }

    def spec_tuned_on(self) -> dict[str, str]:
        """The stamp of the spec this engine applies ({} where it has none or no spec)."""
        return json.loads(spec_tool("tuned-on", str(self.spec))) if self.spec else {}

    def clear_cache(self) -> None:
        for kernel in self._kernels.values():
            shutil.rmtree(kernel.folder, ignore_errors=True)
        self._kernels.clear()

    # --- running ------------------------------------------------------------------------

    def execute(
        self,
        workload: Workload,
        schedule_parameters: Config | None = None,
        check_correctness: bool = True,
    ) -> ExecutionResult:
        check_memory(workload, "run", verify=check_correctness)
        kernel = self.compile(workload, schedule_parameters)
        with workload.allocate(self) as buffers:
            kernel.timer(buffers)(1, 1)
            verification = workload.verify(self) if check_correctness else None
            shares = kernel.time_shares(buffers)
        tuned = self.tuned_root(workload) if schedule_parameters else None
        dispatches = [
            f"dispatch {root.dispatch}: {root.describe()}, "
            f"{shares.get(root.dispatch, 0.0):.0%} of the dispatches' time"
            + (" (--param)" if root == tuned else "")
            + (" (spec)" if root.matched else "")
            for root in self.dispatches(workload)
        ]
        return ExecutionResult(
            workload.describe(), dict(schedule_parameters or IREE_DEFAULT), verification,
            {**self.provenance(schedule_parameters), "iree_dispatches": dispatches},
        )  # fmt: skip

    def benchmark(
        self,
        workload: Workload,
        schedule_parameters: Config | None = None,
        check_correctness: bool = True,
        options: BenchOptions | None = None,
        timing_slot: AbstractContextManager[object] | None = None,
    ) -> BenchResult:
        check_memory(workload, "benchmark", verify=check_correctness)
        kernel = self.compile(workload, schedule_parameters)
        options = options or BenchOptions()
        complexity = workload.get_complexity()
        with workload.allocate(self) as buffers:
            verify = (lambda: workload.verify(self)) if check_correctness else None
            if kernel.timed is not None:  # verified whole, then the dispatch timed
                verification = verified_call(kernel.calls(buffers), verify)[0] if verify else None
                with timing_slot or nullcontext(), running("benchmark"):
                    seconds = run_benchmark(kernel.timer(buffers), options)
                complexity = Complexity(self.tuned_root(workload).flops, 0, 0)
            else:
                seconds, verification = verify_then_time(
                    kernel.timer(buffers), verify, options, timing_slot
                )
        return bench_result(
            workload=workload.describe(),
            parameters=dict(schedule_parameters or IREE_DEFAULT),
            seconds=seconds,
            complexity=complexity,
            verified=bool(verification and verification.ok and not verification.skipped),
            extra={"target": self.target.name, **self.provenance(schedule_parameters)},
        )

    def provenance(self, parameters: Config | None) -> dict[str, object]:
        """What `bench` prints of a run: the pipeline, where the config came from, the
        spec applied."""
        source = "explicit" if parameters else "IREE's own" if self.spec is None else "spec"
        return {
            "engine": "iree",
            "pipeline": "iree-compile, llvm-cpu (DoubleTilingExpert for contractions)",
            "config_source": source,
            "parameter_sources": dict.fromkeys(parameters or IREE_DEFAULT, source),
            "spec": None if parameters or self.spec is None else str(self.spec),
        }

    # --- what this engine does not do ---------------------------------------------------

    def plan(self, workload: Workload, schedule_parameters: Config | None = None) -> Lowering:
        raise UsageError(
            "the IREE engine lowers with iree-compile and has no pipeline plan; "
            "drop --engine iree to see the MLIR JIT engine's",
            stage="iree",
        )

    def lower_payload(self, workload: Workload, schedule_parameters=None, **_) -> object:
        return self.plan(workload, schedule_parameters)

    # --- helpers ------------------------------------------------------------------------

    def _source(self, workload: Workload) -> Path:
        path = Path(self._folder.name) / f"{_key(workload)[:16]}.mlir"
        if not path.exists():
            path.write_text(tensor_payload(workload))
        return path


def _key(workload: Workload) -> str:
    return digest(workload.describe())


def _outputs(workload: Workload) -> list[int]:
    return [i for i, spec in enumerate(workload.arguments()) if spec.is_output]


def _dispatch_order(path: Path) -> int:
    """Dumped configurations are named ..._dispatch_N.mlir: order them by N."""
    digits = path.stem.rsplit("_", 1)[-1]
    return int(digits) if digits.isdigit() else 0
