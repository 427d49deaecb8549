"""Tuning-spec libraries: round trips, matchers, merging and overlaps, malformed and stale
libraries, the shipped defaults, and tune -> export -> compile end to end."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from mlir import ir

from mlirtune.cli import main
from mlirtune.curation.check import check
from mlirtune.curation.export import entry_metadata, entry_name, payload_root, signature_for
from mlirtune.engine.mlir_jit import MlirJitEngine
from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.context import new_context
from mlirtune.specs.library import SpecLibrary
from mlirtune.specs.matchers import CONFIG_ATTRIBUTE, SOURCE_ATTRIBUTE, read_config, signature_of
from mlirtune.specs.merge import apply, merge, probe, root_ops
from mlirtune.specs.sources import fetch
from mlirtune.specs.specset import DEFAULTS_DIR, SpecSet, SpecWarning
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.db import TuningDB, Verdict
from mlirtune.tune.evaluator import EvaluatorSettings
from mlirtune.tune.problem import generate
from mlirtune.tune.tuner import TuneOptions, tune
from mlirtune.workloads import workload_class

TARGET = HostCPU()
MATMUL = ("matmul", (("M", 64), ("N", 48), ("K", 32)))
MATMUL_K16 = ("matmul", (("M", 64), ("N", 48), ("K", 16)))
MATMUL_BF16 = ("matmul", (("M", 64), ("N", 48), ("K", 32), ("dtype", "bf16")))
CONV = ("conv2d", (("H", 10), ("W", 10), ("C", 8), ("F", 16)))
CONV_S2 = ("conv2d", (("H", 17), ("W", 17), ("C", 8), ("F", 16), ("stride", 2)))  # same loops
SHAPE = ["M=64", "N=48", "K=32"]
METADATA_KEYS = {"workload", "kind", "pipeline", "speedup", "target", "toolchain"}


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """No download cache or database leaks in or out (subprocesses inherit); conftest
    already keeps the developer's spec libraries out."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("MLIRTUNE_DB", str(tmp_path / "default.db"))


@pytest.fixture
def ctx():
    with new_context(), ir.Location.unknown():
        yield


@functools.cache
def problem(spec):
    """The tuning problem of a (workload name, options) pair (cached: plans once)."""
    name, options = spec
    return generate(workload_class(name)(**dict(options)), TARGET)


def workload(spec):
    return workload_class(spec[0])(**dict(spec[1]))


def baseline(spec) -> dict[str, int]:
    p = problem(spec)
    return p.slot_values(p.baseline)


def valid_other(spec) -> dict[str, int]:
    """A config (slot values) valid in the space here that is not the selector's."""
    p = problem(spec)
    return p.slot_values(next(c for c in p.space.enumerate() if c != p.baseline))


def add(library, spec, config=None, *, name=None, **metadata) -> str:
    """Add `spec`'s entry as export does (metadata overridden by `metadata`)."""
    p = problem(spec)
    config = baseline(spec) if config is None else config
    verdict = Verdict(config, baseline(spec), True, 1.25, 1e-3, gflops=2.0)
    name = name or entry_name(p.key.workload, p.key.pipeline)
    meta = {**entry_metadata(p.key, verdict, TARGET.hardware_class()), **metadata}
    library.add(name, signature_for(p.key.workload), config, meta)
    return name


def payload(spec):
    """The annotated payload of `spec` (keep it referenced while using its ops)."""
    return payload_root(problem(spec).key.workload)[0]


def invalid_config(spec) -> dict[str, int]:
    """A knob config that breaks some constraint of the space here."""
    p = problem(spec)
    tries = ({"NR": 24}, {"NR": 8}, {"MR": 16, "NR": 48}, {"MR": 1})
    return next(c for c in ({**p.baseline, **t} for t in tries) if p.space.violations(c))


def save(tmp_path, name, *entries, **metadata):
    """Write library `name`.mlir holding (spec, config) entries; returns its path."""
    with new_context(), ir.Location.unknown():
        library = SpecLibrary.create(name)
        for spec, config in entries:
            add(library, spec, config, **metadata)
        return str(library.save(tmp_path / f"{name}.mlir"))


def load(path) -> SpecLibrary:
    return SpecLibrary.parse(fetch(str(path)))


def spec_engine(*paths) -> MlirJitEngine:
    return MlirJitEngine(target=TARGET, specs=SpecSet([fetch(str(p)) for p in paths], TARGET))


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def mlirtune(*argv, cwd, env=None):
    command = [sys.executable, "-m", "mlirtune", *map(str, argv)]
    env = {**os.environ, **(env or {})}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


# --- libraries and matchers --------------------------------------------------------------


def test_text_and_bytecode_round_trip(ctx, tmp_path):
    library = SpecLibrary.create("lib", {"target": "test", "n": 3})
    specs = (MATMUL, CONV, MATMUL_BF16)
    names = [add(library, spec, valid_other(spec)) for spec in specs]
    text = load(library.save(tmp_path / "lib.mlir"))
    code = load(library.save(tmp_path / "lib.mlirbc"))
    assert (tmp_path / "lib.mlirbc").read_bytes()[:4] == b"ML\xefR"
    assert not (tmp_path / "lib.mlir").read_bytes().startswith(b"ML\xefR")
    assert [e.name for e in library.entries] == names and len(set(names)) == 3
    for parsed in (text, code):
        assert parsed.name == "lib" and parsed.metadata == {"target": "test", "n": 3}
        assert parsed.entries == library.entries  # names, symbols, metadata and configs
    payloads = [payload(spec) for spec in specs]
    for own, module in zip(names, payloads, strict=True):
        assert probe(text, module) == probe(code, module) == [[own]]


def test_matchers_tell_shapes_strides_and_types_apart(ctx):
    specs = (MATMUL, MATMUL_K16, MATMUL_BF16, CONV, CONV_S2)
    library = SpecLibrary.create("lib")
    names = [add(library, spec, name=f"e{i}") for i, spec in enumerate(specs)]
    payloads = [payload(spec) for spec in specs]
    conv, conv_s2 = (root_ops(p)[0] for p in payloads[3:])
    assert conv.opview.outputs[0].type == conv_s2.opview.outputs[0].type  # only strides differ
    assert [probe(library, module) for module in payloads] == [[[name]] for name in names]


IOTA_AND_SCALE = """
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @payload(%x: tensor<8x16xf32>) -> (tensor<8x16xi64>, tensor<8x16xf32>) {
  %e = tensor.empty() : tensor<8x16xi64>
  %iota = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"],
      mlirtune.root = "elementwise"} outs(%e : tensor<8x16xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  } -> tensor<8x16xi64>
  %f = tensor.empty() : tensor<8x16xf32>
  %scaled = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel",
      "parallel"], mlirtune.root = "elementwise"} ins(%x : tensor<8x16xf32>)
      outs(%f : tensor<8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  return %iota, %scaled : tensor<8x16xi64>, tensor<8x16xf32>
}
"""


def test_matchers_take_ops_without_inputs(ctx):
    """An op with no inputs (an iota) gets an entry of its own, and another generic's
    matcher, which checks input 0, fails on it instead of aborting in MLIR."""
    module = ir.Module.parse(IOTA_AND_SCALE)
    iota, scaled = root_ops(module)
    library = SpecLibrary.create("lib")
    for name, op in (("iota", iota), ("scaled", scaled)):
        library.add(name, signature_of(op), {"TILE": 4}, {"kind": "elementwise"})
    assert probe(library, module) == [["iota"], ["scaled"]]


def test_entries_differing_only_in_stride_are_both_kept(ctx):
    """Export and --update-spec replace entries by name: the stride-1 entry must survive."""
    library = SpecLibrary.create("lib")
    add(library, CONV)
    add(library, CONV_S2)
    assert len(library.entries) == 2


def test_merge_order_decides_and_check_reports_shadowing(ctx, tmp_path):
    first, second = valid_other(MATMUL), baseline(MATMUL)
    a, b = SpecLibrary.create("a"), SpecLibrary.create("b")
    name = add(a, MATMUL, first)
    add(b, MATMUL, second)
    for libraries, winner, config in (([a, b], "a", first), ([b, a], "b", second)):
        loser = "b" if winner == "a" else "a"
        module = payload(MATMUL)
        merged, origins = merge(libraries, "m", tag=True)
        assert [o.label for o in origins] == [f"{winner}:{name}", f"{loser}:{name}"]
        apply(merged, module)
        (op,) = root_ops(module)
        assert read_config(op.attributes[CONFIG_ATTRIBUTE]) == config
        assert ir.StringAttr(op.attributes[SOURCE_ATTRIBUTE]).value == f"{winner}:{name}"
        first_report, second_report = check(libraries, TARGET)
        assert first_report.matches_own and first_report.shadowed_by is None
        assert first_report.also_matches == [f"{loser}:{name}"]
        assert second_report.matches_own and second_report.shadowed_by == f"{winner}:{name}"
        assert first_report.ok and second_report.ok


def test_cli_merge_and_verify_report_the_overlap(tmp_path, capsys):
    a = save(tmp_path, "a", (MATMUL, valid_other(MATMUL)), (CONV, None))
    b = save(tmp_path, "b", (MATMUL, baseline(MATMUL)))
    out_path = tmp_path / "out.mlir"
    code, out, _ = cli(capsys, "specs", "merge", a, b, "-o", out_path)
    name = entry_name(problem(MATMUL).key.workload, "matmul")
    assert code == 0 and f"overlap: a:{name} wins over b:{name}" in out
    with new_context(), ir.Location.unknown():
        merged = load(out_path)
        assert len({e.name for e in merged.entries}) == 3
        assert [e.config for e in merged.entries if e.name.startswith(name)] == [
            valid_other(MATMUL),
            baseline(MATMUL),
        ]
    code, out, _ = cli(capsys, "specs", "verify", a, b)
    assert code == 0
    assert f"overlap b:{name}: a:{name} also matches it and wins" in out
    assert "3 entries: 0 with problems, 1 shadowed" in out


# --- malformed libraries -----------------------------------------------------------------


def _bad_library(tmp_path, kind: str) -> tuple[str, str]:
    """A broken library file and the entry name its error must mention."""
    path = save(tmp_path, "good", (MATMUL, None))
    text = Path(path).read_text()
    name = entry_name(problem(MATMUL).key.workload, "matmul")
    bad = {
        "unknown-op": text.replace("transform.match.operation_name", "transform.match.bogus", 1),
        "no-entry-point": "module attributes {transform.with_named_sequence} {}\n",
        "config": text.replace(f"MR = {baseline(MATMUL)['MR']} : i64", 'MR = "eight"'),
    }[kind]
    assert bad != text
    (tmp_path / "bad.mlir").write_text(bad)
    return str(tmp_path / "bad.mlir"), name


@pytest.mark.jit
@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("unknown-op", "does not parse or verify"),
        ("no-entry-point", "no @__mlirtune_specs named sequence"),
        ("config", "its config is not a dictionary of integers"),
    ],
)
def test_malformed_libraries_are_usage_errors(ctx, tmp_path, capsys, kind, message):
    path, name = _bad_library(tmp_path, kind)
    with pytest.raises(UsageError) as raised:
        load(path)
    text = str(raised.value)
    assert path in text and message in text
    if kind != "no-entry-point":
        assert f"entry {name}" in text
    for argv in (["specs", "verify", path], ["run", "matmul", *SHAPE, "--spec", path]):
        code, _, err = cli(capsys, *argv)
        assert code == 2 and err.startswith("mlirtune: error:") and message in err
        if kind != "unknown-op":  # that one adds the parser's diagnostics below
            assert err.count("\n") == 1


@pytest.mark.jit
def test_unknown_parameter_fails_at_compile(tmp_path, capsys):
    path = save(tmp_path, "bogus", (MATMUL, {"BOGUS": 4}))
    with pytest.raises(UsageError) as raised:
        spec_engine(path).plan(workload(MATMUL))
    name = entry_name(problem(MATMUL).key.workload, "matmul")
    assert f"spec library {path}, entry {name}: sets BOGUS" in str(raised.value)
    code, _, err = cli(capsys, "run", "matmul", *SHAPE, "--spec", path)
    assert code == 2 and err.startswith("mlirtune: error:") and err.count("\n") == 1
    assert "BOGUS" in err and name in err


# --- stale entries -----------------------------------------------------------------------

# Another CPU of this host's class (another CPU class: tests/specs/test_specs_classes.py).
OTHER_CPU = {"target": {"hash": "0000", "summary": "other cpu", "class": TARGET.hardware_class()}}
OLD_TOOLCHAIN = {"toolchain": {"hash": "0000", "summary": "old llvm"}}


@pytest.mark.parametrize(("stale", "why"), [(OTHER_CPU, "other cpu"), (OLD_TOOLCHAIN, "old llvm")])
def test_stale_entry_with_valid_config_applies_with_warning(tmp_path, stale, why):
    config = valid_other(MATMUL)
    path = save(tmp_path, "stale", (MATMUL, config), **stale)
    with pytest.warns(SpecWarning, match=f"{why}.*valid here, applying it"):
        lowering = spec_engine(path).plan(workload(MATMUL))
    name = entry_name(problem(MATMUL).key.workload, "matmul")
    assert lowering.config_source == f"spec:stale:{name}"
    assert {k: lowering.values[k] for k in config} == config


@pytest.mark.parametrize("valid", [True, False])
def test_stale_shipped_entry_is_a_note_not_a_warning(tmp_path, monkeypatch, valid):
    """The shipped libraries are tuned on one CPU for every CPU of their class: a stale
    entry there is expected, so the lowering notes it and nothing is printed per compile."""
    config = valid_other(MATMUL) if valid else problem(MATMUL).slot_values(invalid_config(MATMUL))
    monkeypatch.setattr("mlirtune.specs.specset.DEFAULTS_DIR", tmp_path)
    path = save(tmp_path, "shipped", (MATMUL, config), **OTHER_CPU)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lowering = spec_engine(path).plan(workload(MATMUL))
    (note,) = lowering.notes
    assert "tuned on another target (other cpu)" in note
    assert ("applying it" in note) == valid and ("not applied" in note) != valid
    assert lowering.config_source.startswith("spec:shipped:") == valid


@pytest.mark.parametrize("stale", [OTHER_CPU, OLD_TOOLCHAIN])
def test_stale_entry_with_invalid_config_is_skipped(tmp_path, capsys, stale):
    p = problem(MATMUL)
    config = invalid_config(MATMUL)
    broken = [v for v in p.space.violations(config) if not v.endswith("_domain")]
    path = save(tmp_path, "stale", (MATMUL, p.slot_values(config)), **stale)
    with pytest.warns(SpecWarning, match="not applied") as caught:
        lowering = spec_engine(path).plan(workload(MATMUL))
    assert all(b in str(caught[0].message) for b in broken) and broken
    assert lowering.config_source == "selector"
    assert lowering.values == {**baseline(MATMUL), **TARGET.pipeline_values()}
    with new_context(), ir.Location.unknown():
        (report,) = check([load(path)], TARGET)
    assert report.stale and set(broken) <= set(report.broken) and not report.ok
    code, out, _ = cli(capsys, "specs", "verify", path)
    assert code == 1 and "not applied: breaks" in out


def test_stale_entry_that_predates_a_knob_is_skipped(tmp_path, capsys):
    """A knob added to the family after the entry was tuned, which the selector sets to
    another value than its default: a current entry leaves it at its default (it was
    measured so), a stale one is not applied."""
    config = {k: v for k, v in valid_other(MATMUL).items() if k != "KC"}  # selected 32, not 256
    name = entry_name(problem(MATMUL).key.workload, "matmul")
    current = save(tmp_path, "current", (MATMUL, config))
    assert spec_engine(current).plan(workload(MATMUL)).config_source == f"spec:current:{name}"
    stale = save(tmp_path, "stale", (MATMUL, config), **OTHER_CPU)
    with pytest.warns(SpecWarning, match="predates the knob.s. KC of its schedule family"):
        lowering = spec_engine(stale).plan(workload(MATMUL))
    assert lowering.config_source == "selector"
    code, out, _ = cli(capsys, "specs", "verify", stale)
    assert code == 1 and "unset KC" in out


def test_an_entry_that_kept_the_selector_applies_only_while_the_selector_agrees(tmp_path, capsys):
    """won = false: the race found nothing faster than the selector of its day, whose config
    the entry holds. While the selector still chooses it, the entry applies (the same
    config); an older selector's config is not applied, and `specs verify` says why."""
    name = entry_name(problem(MATMUL).key.workload, "matmul")
    same = save(tmp_path, "same", (MATMUL, baseline(MATMUL)), won=False)
    assert spec_engine(same).plan(workload(MATMUL)).config_source == f"spec:same:{name}"
    older = save(tmp_path, "older", (MATMUL, valid_other(MATMUL)), won=False)
    with pytest.warns(SpecWarning, match="the selector now chooses another, so it is not"):
        lowering = spec_engine(older).plan(workload(MATMUL))
    assert lowering.config_source == "selector"
    assert lowering.values == {**baseline(MATMUL), **TARGET.pipeline_values()}
    code, out, _ = cli(capsys, "specs", "verify", older)
    assert code == 1 and "not applied, pinned the choice of a selector that has since moved" in out
    assert cli(capsys, "specs", "verify", same)[0] == 0


def test_an_entry_that_kept_a_selector_config_outside_the_space_applies_silently(tmp_path):
    """The selector may choose outside the tuner's space (a matrix-vector product's single
    accumulator): an entry that kept its choice is that choice, nothing to warn about."""
    spec = ("matmul", (("M", 1), ("N", 1000), ("K", 512)))
    assert problem(spec).space.violations(problem(spec).baseline)  # outside the space
    path = save(tmp_path, "kept", (spec, baseline(spec)), won=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpecWarning)
        lowering = spec_engine(path).plan(workload(spec))
    assert lowering.config_source.startswith("spec:kept:")


def test_verify_says_which_model_made_the_entries_tuned_on_its_dispatches(tmp_path, capsys):
    """An entry of `tune --torch` records a dispatch of a model, whose payload only that
    model makes: verify checks its class and staleness and names the model, no error."""
    dispatch = {"name": "dispatch", "module": "Tiny", "dispatch": "dispatch_0_matmul", "seed": 0}
    path = save(tmp_path, "model", (MATMUL, baseline(MATMUL)), workload=dispatch)
    code, out, _ = cli(capsys, "specs", "verify", path)
    assert code == 0, out
    assert "1 entry tuned on dispatches of Tiny" in out and "0 with problems" in out
    stale = save(tmp_path, "stale", (MATMUL, baseline(MATMUL)), workload=dispatch, **OTHER_CPU)
    code, out, _ = cli(capsys, "specs", "verify", stale)
    assert code == 0 and "(other cpu); its config is checked when the model compiles" in out


# --- the shipped libraries ---------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(DEFAULTS_DIR.glob("*.mlir")), ids=lambda p: p.name)
def test_shipped_library(ctx, path):
    library = load(path)
    library.module.operation.verify()
    assert library.entries
    for entry in library.entries:
        assert set(entry.metadata) >= METADATA_KEYS, entry.name
        assert entry.config and all(isinstance(v, int) for v in entry.config.values())
    # The target it was tuned for: its ISA (as named in the library), on this CPU.
    isa = library.metadata["target"].removeprefix("x86_64-")
    target = HostCPU(isa=isa)
    tuned_on = library.metadata["target_class"]
    assert path.stem == f"{target.spec_library_name()}-{tuned_on}"
    assert {entry.metadata["target"]["class"] for entry in library.entries} == {tuned_on}
    for report in check([library], target):
        assert report.error is None and report.matches_own is True, report
        assert report.shadowed_by is None and report.also_matches == [], report
        # Tuned on this CPU: its config must be valid in the target's space. (On another CPU
        # the entries are stale, and whether they apply there is for the runtime to judge.)
        assert report.stale or report.broken == [], report
    for entry in library.entries:
        meta = entry.metadata
        module, root = payload_root({"options": meta["workload"], "kind": meta["kind"]})
        hits = [
            n for n in probe(library, module)[root] if library.entry(n).pipeline == entry.pipeline
        ]
        assert hits == [entry.name]


def test_shipped_library_list_exists():
    assert sorted(DEFAULTS_DIR.glob("*.mlir")), f"no shipped library in {DEFAULTS_DIR}"


# --- list / show -------------------------------------------------------------------------


def test_cli_list_and_show(tmp_path, capsys):
    config = valid_other(MATMUL)
    path = save(tmp_path, "LIB", (MATMUL, config))
    name = entry_name(problem(MATMUL).key.workload, "matmul")
    code, out, _ = cli(capsys, "specs", "list", path)
    assert code == 0 and "LIB" in out
    (line,) = [line for line in out.splitlines() if name in line]
    assert "1.250x" in line and "matmul" in line
    code, out, _ = cli(capsys, "specs", "show", "--for", "matmul", *SHAPE, "--spec", path)
    values = " ".join(f"{k}={v}" for k, v in config.items())
    assert code == 0 and f"matches LIB:{name}" in out
    (line,) = [line for line in out.splitlines() if line.startswith("config:")]
    assert line.startswith(f"config: spec:LIB:{name}:")
    target = {f"{k}={v}" for k, v in HostCPU().pipeline_values().items()}  # THREADS, ISA, ...
    assert set(line.split(": ", 2)[2].split()) == {*values.split(), *target}
    code, out, _ = cli(capsys, "specs", "show", "--for", "matmul", "M=64", "N=48", "K=16",
                       "--spec", path)  # fmt: skip
    assert code == 0 and "no entry of LIB" in out and "config: selector:" in out


# --- tuning: verdicts, export, compile ---------------------------------------------------


@pytest.mark.jit
@pytest.mark.subprocess
def test_tune_records_one_verdict(tmp_path):
    p = problem(MATMUL)
    options = TuneOptions(
        budget=3,
        strategy="exhaustive",
        race_rounds=2,
        evaluator=EvaluatorSettings(workers=2, compile_timeout_s=60, run_timeout_s=3),
    )
    with TuningDB(tmp_path / "t.db") as db:
        report = tune(p, options, db)
        ((key, verdict),) = db.verdicts()
    assert key.workload_hash == p.key.workload_hash and key.pipeline == p.key.pipeline
    assert verdict.params == p.slot_values(report.best)
    assert verdict.baseline == baseline(MATMUL)
    assert verdict.won == (report.winner is not None)
    if not verdict.won:
        assert verdict.params == verdict.baseline
    assert verdict.speedup > 0 and verdict.median_s > 0


def _bench(tmp_path, *argv, env=None) -> dict:
    argv = ("bench", "matmul", *argv, "--json", "--max-time", "0.05")
    out = mlirtune(*argv, cwd=tmp_path, env=env)
    return json.loads(out)


@pytest.mark.jit
@pytest.mark.subprocess
def test_tune_export_and_compile_end_to_end(tmp_path):
    db, lib, lib2 = tmp_path / "DB.db", tmp_path / "LIB.mlir", tmp_path / "LIB2.mlir"
    tune_args = ["--strategy", "random", "--db", db, "--json", "--update-spec", lib2]
    report = json.loads(mlirtune("tune", "matmul", *SHAPE, "--budget", 6, *tune_args, cwd=tmp_path))
    assert report["evaluated"] == 6
    mlirtune("specs", "export", "--db", db, "-o", lib, cwd=tmp_path)
    with new_context(), ir.Location.unknown():
        (entry,) = load(lib).entries
        (updated,) = load(lib2).entries
    # export reads the key back from the database, --update-spec uses the live one
    assert updated.name == entry.name and updated.config == entry.config
    assert entry.config == report["best_params"]  # the slots are the knobs for matmul

    tuned = _bench(tmp_path, *SHAPE, "--spec", lib)
    assert tuned["config_source"] == f"spec:LIB:{entry.name}"
    target = HostCPU().pipeline_values()  # the target's values
    assert tuned["parameters"] == {**entry.config, **target}
    other = _bench(tmp_path, "M=64", "N=48", "K=16", "--spec", lib)
    assert other["config_source"] == "selector"
    configured = {"MLIRTUNE_SPECS": str(lib)}
    assert _bench(tmp_path, *SHAPE, env=configured)["config_source"] == tuned["config_source"]
    assert _bench(tmp_path, *SHAPE, "--no-specs", env=configured)["config_source"] == "selector"

    mlirtune("tune", "matmul", "M=64", "N=48", "K=16", "--budget", 2, *tune_args, cwd=tmp_path)
    with new_context(), ir.Location.unknown():
        first, second = load(lib2).entries
    assert first == updated
    assert second.name == entry_name(problem(MATMUL_K16).key.workload, "matmul")
    mlirtune("tune", "matmul", *SHAPE, "--budget", 2, *tune_args, cwd=tmp_path)
    with new_context(), ir.Location.unknown():
        entries = load(lib2).entries
    assert [e.name for e in entries] == [first.name, second.name]
    assert entries[0].metadata["tuned_at"] > first.metadata["tuned_at"]


@pytest.mark.parametrize("transpose", ["b", "a", "ab"])
def test_an_entry_applies_to_its_own_operand_layout_only(tmp_path, transpose):
    """The matchers see shapes and element types: an entry tuned on B stored [K, N] also
    matches a Linear layer's B [N, K] of the same shape, whose packing differs. It applies
    to the layout it was tuned on only."""
    name = entry_name(problem(MATMUL).key.workload, "matmul")
    path = save(tmp_path, "plain", (MATMUL, valid_other(MATMUL)))
    assert spec_engine(path).plan(workload(MATMUL)).config_source == f"spec:plain:{name}"
    transposed = ("matmul", (*MATMUL[1], ("transpose", transpose)))
    assert spec_engine(path).plan(workload(transposed)).config_source == "selector"


def test_export_leaves_iree_verdicts_to_iree_specs(tmp_path, ctx):
    """A verdict over IREE's knobs (`tune --engine iree`) is no entry of this project's
    libraries: its config names no slot of our pipelines. `specs export --engine iree`
    says where IREE's specs come from."""
    import dataclasses

    from mlirtune.curation.export import export_library
    from mlirtune.iree.problem import PIPELINE_NAME

    p = problem(MATMUL)
    iree_key = dataclasses.replace(p.key, pipeline=PIPELINE_NAME, pipeline_hash="iree")
    iree_config = {"TILE_M": 32, "TILE_N": 32, "VEC_M": 4, "VEC_N": 16, "VEC_K": 2}
    with TuningDB(tmp_path / "t.db") as db:
        db.record_verdict(p.key, Verdict(baseline(MATMUL), baseline(MATMUL), False, 1.0, 1e-3))
        db.record_verdict(
            iree_key, Verdict(iree_config, dict.fromkeys(iree_config, 0), True, 1.2, 1e-3)
        )
        (entry,) = export_library(db, TARGET, "lib").entries
    assert entry.pipeline == p.key.pipeline and entry.config == baseline(MATMUL)
    export = ["specs", "export", "--engine", "iree", "--db", str(tmp_path / "t.db")]
    assert main([*export, "-o", str(tmp_path / "x.mlir")]) == 2
