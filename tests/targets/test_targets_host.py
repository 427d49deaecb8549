"""The host CPU target (feature detection, overrides, facts) and the analytic parameter
selectors the schedule families run on those facts."""

import dataclasses
import math

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.registry import family_named
from mlirtune.schedules.roots import annotate_roots
from mlirtune.targets import CpuFeatures, HostCPU, Target, detect_features, host_cpu
from mlirtune.workloads import BatchMatmul, Conv2d, Matmul, Mlp

AVX512 = CpuFeatures(
    arch="x86_64",
    model="test avx512",
    isa="avx512",
    flags=frozenset({"avx512f", "avx2", "fma"}),
    vector_bits=512,
    vector_registers=32,
    l1d_bytes=32 << 10,
    l2_bytes=1 << 20,
    l3_bytes=32 << 20,
    cores=8,
    ghz=2.0,
)
FEATURE_SETS = {
    "avx512": {},
    "avx2": {"isa": "avx2"},
    "sse": {"isa": "sse"},
    "small_l1": {"l1d_bytes": 16 << 10, "l2_bytes": 256 << 10},
}


def host(**overrides) -> HostCPU:
    return HostCPU(AVX512, **overrides)


def select(target: HostCPU, schedule: str, op: OpInfo) -> dict[str, int]:
    """The parameters family `schedule`'s selector chooses for `op` on `target`."""
    return family_named(schedule).select(op, target)


def selected_names(schedule: str) -> set[str]:
    """The knobs family `schedule`'s selector chooses (the others keep their defaults)."""
    return {knob.name for knob in family_named(schedule).knobs if knob.selected}


def matmul_op(m: int, n: int, k: int, dtype: str = "f32") -> OpInfo:
    out = "f32" if dtype == "bf16" else dtype
    return OpInfo("matmul", {"M": m, "N": n, "K": k}, (dtype, dtype, out))


# --- detection ------------------------------------------------------------------------------


def test_detected_features_are_plausible():
    features = detect_features()
    assert features is detect_features(), "detection runs once"
    assert features.isa in host_cpu.ISA_VECTORS
    assert features.vector_bits in (128, 256, 512)
    assert features.vector_registers in (16, 32)
    assert 0 < features.l1d_bytes < features.l2_bytes <= features.l3_bytes
    assert features.cores >= 1 and features.ghz > 0
    if features.arch == "x86_64" and "avx512f" in features.flags:
        assert (features.isa, features.vector_bits, features.vector_registers) == (
            "avx512",
            512,
            32,
        )


def test_features_read_from_cpuinfo_and_sysfs(tmp_path, monkeypatch):
    monkeypatch.setattr(host_cpu.platform, "machine", lambda: "x86_64")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: Test CPU\ncpu MHz\t\t: 2400.000\n"
        "flags\t\t: fpu sse2 avx avx2 fma pse\n\nprocessor\t: 1\nmodel name\t: Other\n"
    )
    caches = tmp_path / "cache"
    for index, (level, kind, size) in enumerate(
        [
            (1, "Data", "48K"),
            (1, "Instruction", "32K"),
            (2, "Unified", "2048K"),
            (3, "Unified", "32M"),
        ]
    ):
        folder = caches / f"index{index}"
        folder.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (folder / name).write_text(f"{value}\n")
        (folder / "ways_of_associativity").write_text("12\n" if level == 1 else "16\n")
        (folder / "coherency_line_size").write_text("64\n")
    features = host_cpu.read_features(cpuinfo, caches)
    assert features.model == "Test CPU"
    assert features.isa == "avx2" and features.vector_bits == 256
    assert features.flags == {"sse2", "avx", "avx2", "fma"}
    assert (features.l1d_bytes, features.l2_bytes, features.l3_bytes) == (
        48 << 10,
        2 << 20,
        32 << 20,
    )
    assert features.ghz == pytest.approx(2.4)
    assert (features.l1d_ways, features.line_bytes) == (12, 64)  # L1d's, not L2's


def test_missing_files_fall_back(tmp_path, monkeypatch):
    monkeypatch.setattr(host_cpu.platform, "machine", lambda: "aarch64")
    features = host_cpu.read_features(tmp_path / "none", tmp_path / "none")
    assert (features.arch, features.isa, features.vector_registers) == ("aarch64", "generic", 32)
    assert (features.l1d_bytes, features.l2_bytes, features.l3_bytes) == (
        32 << 10,
        1 << 20,
        8 << 20,
    )
    assert features.ghz == host_cpu.FALLBACK_GHZ
    assert (features.l1d_ways, features.line_bytes) == (8, 64)


@pytest.mark.parametrize(
    ("text", "size"), [("64K", 65536), ("2048K\n", 2 << 20), ("32M", 32 << 20)]
)
def test_cache_sizes_parse(text, size):
    assert host_cpu._parse_size(text) == size


# --- overrides, search path, fingerprint --------------------------------------------------


def test_host_cpu_is_a_target_with_detected_defaults():
    target = HostCPU()
    assert isinstance(target, Target) and target.name == "host"
    assert target.features == detect_features()


def test_isa_override_sets_vector_shape_and_search_path():
    avx2 = host(isa="avx2")
    assert (avx2.features.vector_bits, avx2.features.vector_registers) == (256, 16)
    assert avx2.descriptor_search_path() == ["x86_64/avx2", "x86_64", "generic"]
    assert host().descriptor_search_path() == ["x86_64/avx512", "x86_64", "generic"]
    assert host(isa="sse").descriptor_search_path() == ["x86_64", "generic"]
    assert host(arch="aarch64", isa="generic").descriptor_search_path() == ["generic"]
    # Fields given explicitly win over the ISA's usual shape.
    assert host(isa="avx2", vector_registers=32).features.vector_registers == 32


def test_unknown_override_is_a_usage_error():
    with pytest.raises(UsageError, match="l4_bytes"):
        host(l4_bytes=1)
    with pytest.raises(UsageError, match="avx1024"):
        host(isa="avx1024")


def test_fingerprint():
    fingerprint = host().fingerprint()
    assert fingerprint["isa"] == "avx512" and fingerprint["model"] == "test avx512"
    assert fingerprint["flags"] == ["avx2", "avx512f", "fma"]
    assert fingerprint["l1d_bytes"] == 32 << 10


# --- the selector -------------------------------------------------------------------------


def check_contraction(target: HostCPU, op: OpInfo, chosen: dict[str, int]) -> None:
    """Properties every contraction choice must have."""
    knobs = {"MC", "NC", "KC", "MR", "NR", "ORDER", "PACK", "PREFETCH", "UNIT"}
    assert chosen.keys() == selected_names("contraction") == knobs
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    if chosen["PACK"]:  # packed panels are whole register tiles (partial blocks are padded)
        assert chosen["MC"] % chosen["MR"] == 0 or chosen["MC"] == m
        assert chosen["NC"] % chosen["NR"] == 0 or chosen["NC"] == n
    lanes = target.lanes(op.element_type)
    assert chosen["MC"] <= m and chosen["NC"] <= n and chosen["KC"] <= k
    assert chosen["MR"] <= chosen["MC"] and chosen["NR"] <= chosen["NC"]
    assert chosen["MC"] % chosen["MR"] == 0 or chosen["MC"] == m
    assert chosen["NC"] % chosen["NR"] == 0 or chosen["NC"] == n
    # A register tile column is at most one vector or a whole number of vectors.
    assert chosen["NR"] <= lanes or chosen["NR"] % lanes == 0
    vectors = math.ceil(chosen["NR"] / lanes)
    registers = chosen["MR"] * vectors + vectors + 1
    assert registers <= target.features.vector_registers


@pytest.mark.parametrize("features", FEATURE_SETS)
@pytest.mark.parametrize("dtype", ["f32", "f64", "bf16"])
@pytest.mark.parametrize(
    "shape", [(512, 512, 512), (500, 300, 700), (1024, 64, 2048), (33, 17, 9), (1, 1, 1)]
)
def test_contraction_choices_respect_the_model(features, dtype, shape):
    target = host(**FEATURE_SETS[features])
    op = matmul_op(*shape, dtype)
    check_contraction(target, op, select(target, "contraction", op))


def test_register_tile_follows_the_isa():
    op = matmul_op(512, 512, 512)
    chosen = select(host(), "contraction", op)
    # 32 KiB L1 / 1 MiB L2: B passes L2, so it is packed (Goto/BLIS): a micro-kernel of
    # four rows of four vectors, blocks from the cache model
    # (tests/schedules/test_blocking_model.py): its 4-line rows of B prefetched ahead, K in
    # streamed blocks of 128, B's 128 x 512 block within half of L2.
    expected = {"MC": 128, "NC": 512, "KC": 128, "MR": 4, "NR": 64, "PACK": 1, "PREFETCH": 2}
    assert {key: chosen[key] for key in expected} == expected
    avx2 = select(host(isa="avx2"), "contraction", op)
    assert avx2["NR"] == 16 and avx2["MR"] <= 6
    sse = select(host(isa="sse"), "contraction", op)
    assert sse["NR"] == 8


def test_f64_halves_lanes_and_bf16_computes_in_f32():
    target = host()
    f32, f64, bf16 = (  # cache-resident: the register tile of the unpacked path
        select(target, "contraction", matmul_op(128, 256, 64, dtype))
        for dtype in ("f32", "f64", "bf16")
    )
    assert f64["NR"] == f32["NR"] // 2
    assert bf16["NR"] == f32["NR"]


def test_smaller_l1_gives_shorter_k_panels():
    op = matmul_op(1024, 1024, 1024)
    small = select(host(l1d_bytes=8 << 10), "contraction", op)
    large = select(host(l1d_bytes=64 << 10), "contraction", op)
    assert small["KC"] < large["KC"]
    assert small["MR"] * small["KC"] * 4 <= (8 << 10) // 2, "A's micro-panel in L1/2"


def test_divisors_close_to_the_model_are_preferred():
    # Unpacked (B stays in half of L2): a quarter of L1 holds 8 x 256 f32 of A; 240
    # divides K=720 and is within 25% of it.
    chosen = select(host(), "contraction", matmul_op(512, 128, 720))
    assert (chosen["KC"], chosen["PACK"]) == (240, 0)
    assert select(host(), "contraction", matmul_op(512, 128, 1024))["KC"] == 256
    # M=480: rows 8 (the register budget's target) divides it; 12 columns do not fit.
    chosen = select(host(), "contraction", matmul_op(480, 512, 512))
    assert 480 % chosen["MR"] == 0


def test_small_outputs_are_one_cache_tile():
    chosen = select(host(), "contraction", matmul_op(128, 96, 64))
    assert (chosen["MC"], chosen["NC"], chosen["KC"], chosen["PACK"]) == (128, 96, 64, 0)


def test_operands_past_l2_are_packed_in_blocks_that_divide_the_shape():
    # Llama-2-7B's shapes: K in streamed blocks of 128 rows (4 x 64 register tiles whose
    # rows of B are prefetched ahead). B's block may then span 1024 columns, of which
    # 11008 = 43 x 256 takes whole blocks of 256.
    chosen = select(host(), "contraction", matmul_op(256, 11008, 4096))
    assert chosen["PACK"] == 1 and (chosen["NC"], chosen["KC"]) == (256, 128)
    assert select(host(), "contraction", matmul_op(256, 4096, 11008))["KC"] == 128
    # A prime N: the packed nest takes the columns of its whole register tiles (one block
    # of 992) and splits off the other 5.
    chosen = select(host(), "contraction", matmul_op(1000, 997, 1001))
    assert chosen["PACK"] > 0 and 0 < 997 - chosen["NC"] < chosen["NR"]


@pytest.mark.parametrize("rows", [1, 2, 4, 8])
def test_skinny_products_stream_b_once(rows):
    chosen = select(host(), "contraction", matmul_op(rows, 11008, 4096))
    # All rows in one register tile, all of N in one block, 8 rows of B per K block, and
    # as many vectors of columns as the 32 registers take: 4 while 4 * (rows + 1) + 1 fit.
    assert (chosen["MR"], chosen["MC"], chosen["NC"], chosen["KC"]) == (rows, rows, 11008, 8)
    assert chosen["NR"] == (64 if rows <= 4 else 32) and chosen["PACK"] == 0


def test_other_schedules_return_their_parameter_names():
    target = host()
    conv = OpInfo(
        "conv2d", {"N": 1, "OH": 56, "OW": 56, "F": 64, "KH": 3, "KW": 3, "C": 64}, ("f32",) * 3
    )
    chosen = select(target, "convolution", conv)
    assert chosen.keys() == selected_names("convolution")
    assert chosen["F_TILE"] == 32 and 56 % chosen["OW_TILE"] == 0
    rows = OpInfo("elementwise", {"ROWS": 512, "COLS": 1200}, ("f32",) * 2)
    elementwise = select(target, "elementwise", rows)
    assert elementwise.keys() == selected_names("elementwise")
    assert elementwise["COLS"] % 16 == 0 and 1200 % elementwise["COLS"] == 0
    rowwise = select(target, "rowwise", dataclasses.replace(rows, kind="reduction"))
    assert rowwise.keys() == selected_names("rowwise")
    assert rowwise["ROWS"] * rowwise["COLS"] // 16 <= 16, "half the registers for a tile"
    with_exp = dataclasses.replace(rows, kind="reduction", attributes={"transcendentals": 1})
    softmax_tile = select(target, "rowwise", with_exp)  # one vector per row, 4 of 32 registers
    assert (softmax_tile["ROWS"], softmax_tile["COLS"]) == (4, 16)
    # 2.4 MB of input, past the 1 MiB L2: the next row tile is prefetched; 16 KB is not.
    assert softmax_tile["PREFETCH"] == 1
    small = dataclasses.replace(with_exp, dims={"ROWS": 64, "COLS": 64})
    assert select(target, "rowwise", small)["PREFETCH"] == 0
    assert select(host(isa="avx2"), "elementwise", rows)["COLS"] == 40


def test_unknown_schedule_is_a_usage_error():
    with pytest.raises(UsageError, match="tiling"):
        select(host(), "tiling", matmul_op(8, 8, 8))


def test_a_family_without_a_selector_for_the_target_kind_is_a_usage_error():
    class Toy(Target):
        name = "toy"

        def descriptor_search_path(self):
            return []

        def fingerprint(self):
            return {}

    with pytest.raises(UsageError, match=r"schedule contraction .* target toy") as error:
        select(Toy(), "contraction", matmul_op(8, 8, 8))
    assert error.value.stage == "select"


# --- selected parameters compile and verify -----------------------------------------------


def root_of(workload) -> OpInfo:
    with ir.Context(), ir.Location.unknown():
        (op,) = annotate_roots(workload.payload_module())
    return op


WORKLOADS = [
    Matmul(M=64, N=48, K=40),
    Matmul(M=100, N=300, K=70),
    Matmul(M=96, N=80, K=64, dtype="f64"),
    Matmul(M=64, N=64, K=32, dtype="bf16"),
    Mlp(M=72, N=96, K=64),
    BatchMatmul(B=2, M=40, N=48, K=24),
    Conv2d(H=10, W=12, C=8, F=24),
    Conv2d(H=9, W=9, C=5, F=40, dtype="f64"),
]
SCHEDULE = {"matmul": "contraction", "batch_matmul": "contraction", "conv2d": "convolution"}


@pytest.mark.jit
@pytest.mark.parametrize("features", ["avx512", "avx2"])
@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: repr(w.describe()))
def test_selected_parameters_compile_and_verify(engine, workload, features):
    op = root_of(workload)
    parameters = select(host(**FEATURE_SETS[features]), SCHEDULE[op.kind], op)
    result = engine.execute(workload, parameters)
    assert result.verification.ok, (parameters, result.verification.summary())


@pytest.mark.jit
@pytest.mark.parametrize(
    ("isa", "features"), [("avx512", []), ("avx2", ["-avx512f"]), ("sse", ["-avx"])]
)
def test_a_lower_isa_keeps_the_jit_within_it(isa, features):
    """The JIT compiles for the host CPU; a target below it turns the wider features off in
    every function it lowers, and the kernel still verifies."""
    target = HostCPU(dataclasses.replace(AVX512, isa=isa))
    assert target.llvm_target_features() == features
    assert ("llvm_target_features" in target.fingerprint()) == bool(features)
    engine = engine_for(target, use_specs=False)
    workload = Matmul(M=32, N=48, K=16)
    module = engine.lower_payload(workload)
    seen = []

    def visit(op):
        if op.name == "llvm.func" and op.regions[0].blocks:
            seen.append(str(op.attributes["target_features"]) if features else None)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    expected = [f'#llvm.target_features<["{features[0]}"]>' if features else None]
    assert seen and set(seen) == set(expected)
    assert engine.execute(workload).verification.ok
