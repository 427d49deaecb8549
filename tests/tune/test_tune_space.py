"""Search spaces: knob domains, z3 constraints against brute force, sampling, unsat cores,
export as transform.tune.knob IR and the analytic cost model. Nothing is compiled."""

import itertools
import math

import pytest
import z3
from mlir import ir

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.contraction import CONTRACTION
from mlirtune.schedules.contraction.packed_tails import packed_nest
from mlirtune.schedules.cpu_model import rows_conflict_in_l1
from mlirtune.schedules.registry import FAMILIES
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.space_for import space_for

F32 = ("f32", "f32", "f32")
AVX512 = {"isa": "avx512", "l1d_bytes": 32 << 10, "l2_bytes": 1 << 20}
AVX2 = {"isa": "avx2", "l1d_bytes": 32 << 10, "l2_bytes": 1 << 20}
INTEL = {"l1d_bytes": 48 << 10, "l1d_ways": 12, "l2_bytes": 2 << 20, "l2_ways": 16}


def host(**overrides) -> HostCPU:
    return HostCPU(**{**AVX512, **overrides})


def matmul(m: int, n: int, k: int, kind: str = "matmul", **extra) -> OpInfo:
    return OpInfo(kind, {**extra, "M": m, "N": n, "K": k}, F32)


def _vectors(columns: int, lanes: int) -> int:
    return -(-columns // lanes)


def _floor(space, rows: str, columns: str, lanes: int) -> int:
    """The accumulator floor: 8 (2 FMA pipes x 4 cycles), or the most the domains reach."""
    return min(8, max(space.domains[rows]) * _vectors(max(space.domains[columns]), lanes))


def packed_blocks_fit(c, f) -> bool:
    """B's packed block in half of L2's ways; walking N outer (ORDER=2), A's block and a B
    micro-panel in L2's ways but one, and B's block and A's in L3's ways but one."""
    l2_way, l3_way = f.l2_bytes // f.l2_ways, f.l3_bytes // f.l3_ways
    a_block, b_block = 4 * c["MC"] * c["KC"], 4 * c["KC"] * c["NC"]
    if c["PACK"] == 2 and c["ORDER"] == 2:
        a_ways = math.ceil(a_block / l2_way) + math.ceil(4 * c["KC"] * c["NR"] / l2_way)
        b_ways = math.ceil(b_block / l3_way) + math.ceil(a_block / l3_way)
        return a_ways <= f.l2_ways - 1 and b_ways <= f.l3_ways - 1
    return math.ceil(b_block / l2_way) <= max(1, f.l2_ways // 2)


def contraction_ok(c, op, cpu, floor):
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    f, lanes = cpu.features, cpu.lanes("f32")
    v = _vectors(c["NR"], lanes)
    whole_output = c["MC"] == m and c["NC"] == n and m * n * 4 + (m + n) * c["KC"] * 4 <= f.l2_bytes
    return (
        (c["NR"] % lanes == 0 or c["NR"] == n)
        and c["MR"] * v + v + 1 <= f.vector_registers
        and c["MR"] * v >= floor
        and c["MR"] <= c["MC"]
        and c["NR"] <= c["NC"]
        and (c["MC"] % c["MR"] == 0 or c["MC"] == m)
        and (c["NC"] % c["NR"] == 0 or c["NC"] == n)
        and all(t <= lanes or t == 2 * lanes for t in (c["NC"] % c["NR"], n % c["NC"] % c["NR"]))
        and c["MR"] * c["KC"] * 4 <= (f.l1d_ways - 2) * (f.l1d_bytes // f.l1d_ways)
        and (c["PACK"] > 0 or c["KC"] * c["NC"] * 4 <= f.l2_bytes)
        and (c["PACK"] == 0 or packed_blocks_fit(c, f))
        and (c["PACK"] > 0 or c["MC"] * c["NC"] * 4 <= 32 << 10 or whole_output)
        and c["KC"] % c["KU"] == 0
        and (c["KU"] == 1 or k % c["KC"] == 0)
        and c["KU"] * c["MR"] * v <= 32
        and (c["PACK"] == 0 or k * n * 4 > f.l2_bytes // 2)
        and (c["PACK"] == 0 or (c["KU"] == 1 and (c["ORDER"] == 1 or c["PACK"] == 2)))
        and (c["PREFETCH"] == 0 or c["PACK"] == 1)
        and (c["PREFETCH"] != 2 or v == 1 or c["MR"] * v <= f.vector_registers * 3 // 4)
    )


def convolution_ok(c, op, cpu, floor):
    f, lanes = cpu.features, cpu.lanes("f32")
    v = _vectors(c["F_TILE"], lanes)
    return (
        (c["F_TILE"] % lanes == 0 or c["F_TILE"] == op.dims["F"])
        and c["OW_TILE"] * v + v + 1 <= f.vector_registers
        and c["OW_TILE"] * v >= floor
        and op.dims["F"] % c["F_TILE"] in (*range(lanes + 1), 2 * lanes)
        and op.dims["C"] % c["C_TILE"] == 0
        and c["C_TILE"] * c["OW_TILE"] * v <= 64
        and (
            c["PACK_FILTER"] == 0
            or (op.dims["F"] % c["F_TILE"] == 0 and op.dims["OW"] % c["OW_TILE"] == 0)
        )
    )


def vector_tile_ok(share):
    def ok(c, op, cpu, floor):
        lanes = cpu.lanes("f32")
        v = _vectors(c["COLS"], lanes)
        return (c["COLS"] % lanes == 0 or c["COLS"] == op.dims["COLS"]) and c["ROWS"] * v <= int(
            cpu.features.vector_registers * share
        )

    return ok


CONV = OpInfo("conv2d", {"N": 1, "OH": 8, "OW": 14, "F": 56, "KH": 3, "KW": 3, "C": 12}, F32)
CASES = {
    "matmul": (matmul(48, 80, 96), "contraction", host(l1d_bytes=8192, l2_bytes=16384)),
    "matmul_large": (matmul(256, 512, 128), "contraction", host()),
    "batch_matmul": (matmul(32, 48, 64, "batch_matmul", B=4), "contraction", HostCPU(**AVX2)),
    "conv2d": (CONV, "convolution", host()),
    "reduction": (OpInfo("reduction", {"ROWS": 30, "COLS": 100}, F32), "rowwise", host()),
    "elementwise": (
        OpInfo("elementwise", {"ROWS": 7, "COLS": 40}, F32),
        "elementwise",
        HostCPU(**AVX2),
    ),
}
PREDICATES = {
    "contraction": (contraction_ok, "MR", "NR"),
    "convolution": (convolution_ok, "OW_TILE", "F_TILE"),
    "rowwise": (vector_tile_ok(0.5), None, None),
    "elementwise": (vector_tile_ok(1.0), None, None),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    op, schedule, cpu = CASES[request.param]
    return op, cpu, space_for(op, schedule, cpu)


def test_count_matches_brute_force(case):
    op, cpu, space = case
    ok, rows, columns = PREDICATES[space.schedule]
    floor = _floor(space, rows, columns, cpu.lanes("f32")) if rows else 0
    names = list(space.domains)
    brute = [
        dict(zip(names, values, strict=True))
        for values in itertools.product(*space.domains.values())
        if ok(dict(zip(names, values, strict=True)), op, cpu, floor)
    ]
    assert 0 < space.count() == len(brute)
    assert space.enumerate() == sorted(brute, key=lambda c: [c[n] for n in names])


def test_enumeration_is_unique_valid_and_in_domains(case):
    _, _, space = case
    configs = space.enumerate()
    assert len({tuple(c.items()) for c in configs}) == len(configs)
    assert (
        set(configs[0])
        == set(space.domains)
        == {k.name for k in FAMILIES[space.schedule].knobs if k.searched}
    )
    for config in configs:
        assert all(config[name] in values for name, values in space.domains.items())
        assert space.contains(config)
    assert space.enumerate() == configs


def test_sample_is_unique_reproducible_and_honours_exclude(case):
    _, _, space = case
    n = min(10, space.count())
    first = space.sample(n, seed=7)
    assert first == space.sample(n, seed=7)
    assert len({tuple(c.items()) for c in first}) == len(first) == n
    assert all(space.contains(c) for c in first)
    rest = space.sample(n, seed=7, exclude=first[:3])
    assert not any(c in first[:3] for c in rest)
    assert rest[: n - 3] == first[3:]
    everything = space.sample(space.count() + 5, seed=1)
    assert len(everything) == space.count()
    assert space.sample(5, seed=1, exclude=everything) == []


def test_cost_is_positive_and_finite(case):
    _, _, space = case
    costs = [space.cost(c) for c in space.enumerate()]
    assert all(math.isfinite(c) and c > 0 for c in costs)


def test_domains_follow_the_op_and_vector_width():
    space = space_for(matmul(48, 80, 96), "contraction", host(l1d_bytes=8192, l2_bytes=16384))
    assert space.domains == {
        "MC": (12, 24, 32, 48),
        "NC": (16, 32, 64, 80),
        # The KC knob's cache tiles start at 64; 32 is the selector's block for this
        # host's 8 KiB L1, which joins them.
        "KC": (32, 64, 96),
        "MR": (1, 2, 3, 4, 6, 8, 12, 16),
        "NR": (16, 32, 64),
        "KU": (1, 2, 4, 8),
        "ORDER": (1, 2),
        "PACK": (0, 1, 2),
        "PREFETCH": (0, 1, 2),
        "UNIT": (0,),
    }
    assert space.fixed == {}
    batched = space_for(matmul(32, 48, 64, "batch_matmul", B=4), "contraction", host())
    # The packed nest, and its prefetches, take matmul roots only.
    assert batched.domains["PACK"] == batched.domains["PREFETCH"] == (0,)
    narrow = space_for(matmul(6, 8, 8), "contraction", host())
    assert narrow.domains["MR"] == (1, 2, 3, 4, 6) and narrow.domains["NR"] == (8,)
    conv = space_for(CONV, "convolution", host())
    assert conv.domains["F_TILE"] == (16, 32) and conv.domains["C_TILE"] == (1, 2, 3, 4, 6, 12)


def test_violations_name_the_broken_constraints():
    space = space_for(matmul(256, 512, 128), "contraction", host())
    good = space.enumerate()[0]
    assert space.violations(good) == []
    assert "register_budget" in space.violations({**good, "MR": 16, "NR": 64})
    assert space.violations({**good, "MC": 128, "NC": 512, "MR": 8, "NR": 32}) == ["output_block"]
    small_l1 = space_for(matmul(48, 80, 96), "contraction", host(l1d_bytes=4096, l2_bytes=16384))
    assert "a_panel_in_l1" in small_l1.violations({**good, "MR": 16, "KC": 96})
    assert space.violations({**good, "NR": 20})[:1] == ["NR_domain"]
    assert "nr_whole_vectors" in space.violations({**good, "NR": 20})
    assert space.violations({**good, "FOO": 1}) == ["FOO_unknown"]
    narrow_n = space_for(matmul(64, 112, 64), "contraction", host())
    odd_tail = {
        "MC": 8,
        "NC": 112,
        "KC": 64,
        "MR": 4,
        "NR": 64,
        "KU": 1,
        "ORDER": 1,
        "PACK": 0,
        "PREFETCH": 0,
        "UNIT": 0,
    }
    assert narrow_n.violations(odd_tail) == ["nr_tails"]
    assert narrow_n.violations({**odd_tail, "NR": 32}) == []
    packed = {**good, "MC": 128, "NC": 512, "KC": 64, "MR": 8, "NR": 32, "PACK": 2}
    # B (256 KiB) and the output stay in L2.
    assert space.violations(packed) == ["pack_needs_data_past_l2"]
    past_l2 = space_for(matmul(256, 1024, 1024), "contraction", host())  # B: 4 MiB
    assert past_l2.violations(packed) == []  # packed blocks have no output-block limit
    assert past_l2.violations({**packed, "KU": 2}) == ["pack_unrolls_nothing"]
    tiny = host(l1d_bytes=8192, l2_bytes=16384)
    partial = {
        "MC": 8,
        "NC": 64,
        "KC": 64,
        "MR": 8,
        "NR": 32,
        "KU": 1,
        "ORDER": 1,
        "PACK": 2,
        "PREFETCH": 0,
        "UNIT": 0,
    }
    tiny_n = space_for(matmul(64, 112, 64), "contraction", tiny)
    # B's 64 x 64 block is all of the 16 KiB L2, past its half: 64 x 32 keeps to it.
    assert tiny_n.violations(partial) == ["packed_b_block_in_l2"]
    # 32 does not divide 112: the partial column block is padded to whole panels.
    assert tiny_n.violations({**partial, "NC": 32}) == []
    missing = dict(good)
    del missing["KU"]
    assert space.violations(missing) == ["KU_domain"] and not space.contains(missing)

    names = [name for name, _ in space.describe()]
    assert len(set(names)) == len(names) and "b_block_in_l2" in names
    assert all(description for _, description in space.describe())


@pytest.mark.parametrize("size", [256, 512, 1024])
def test_selector_choice_is_in_the_space(size):
    cpu = host()
    op = matmul(size, size, size)
    space = space_for(op, "contraction", cpu)
    chosen = {**FAMILIES["contraction"].select(op, cpu), "KU": 1, "ORDER": 1}
    assert space.violations(chosen) == []
    assert (chosen["PACK"] > 0) == (size > 256)  # B packed once operands leave L2


def test_contraction_space_sizes():
    cpu = host()
    assert space_for(matmul(512, 512, 512), "contraction", cpu).count() >= 500
    # The packing choice (PACK) triples the tiles' configs where the blocks divide the shape;
    # the N-outer order (ORDER=2) adds those packing A whose blocks fit its caches, and the
    # prefetches of A read in place (PREFETCH 1 and 2) those packing B alone.
    assert space_for(matmul(1024, 1024, 1024), "contraction", cpu).count() <= 8500


def test_cost_ranks_a_tiny_register_tile_below_the_selector():
    cpu = host()
    op = matmul(512, 512, 512)
    space = space_for(op, "contraction", cpu)
    chosen = {**FAMILIES["contraction"].select(op, cpu), "KU": 1, "ORDER": 1}
    bad = {
        "MC": 8,
        "NC": 16,
        "KC": 64,
        "MR": 1,
        "NR": 16,
        "KU": 1,
        "ORDER": 1,
        "PACK": 0,
        "PREFETCH": 0,
        "UNIT": 0,
    }
    assert space.cost(bad) > 3 * space.cost(chosen)
    assert space.cost({**chosen, "KU": 2, "PACK": 0}) <= space.cost({**chosen, "PACK": 0})
    ranked = sorted(space.enumerate(), key=space.cost)
    assert space.cost(ranked[0]) <= space.cost(chosen) < space.cost(ranked[-1])
    with pytest.raises(UsageError, match="KU"):
        space.cost({k: v for k, v in chosen.items() if k != "KU"})


def test_cost_sees_a_rows_l1_set_conflicts():
    cpu = host(l1d_bytes=32 << 10, l1d_ways=8)  # a 32 KiB 8-way L1, whatever this host's
    assert rows_conflict_in_l1(16, 4096, cpu) and not rows_conflict_in_l1(8, 4096, cpu)
    assert not rows_conflict_in_l1(16, 2048, cpu) and not rows_conflict_in_l1(16, 4100, cpu)
    # The host's own associativity: a 48 KiB 12-way L1 holds 12 such rows, not 16.
    twelve_ways = host(l1d_bytes=48 << 10, l1d_ways=12)
    assert not rows_conflict_in_l1(12, 4096, twelve_ways) and rows_conflict_in_l1(12, 4096, cpu)
    assert rows_conflict_in_l1(16, 4096, twelve_ways)
    tiles = {"MC": 16, "NC": 128, "KC": 256, "KU": 1, "ORDER": 1}
    tiles = {**tiles, "PACK": 0, "PREFETCH": 0, "UNIT": 0}
    for size, slower in ((512, False), (1024, True)):
        space = space_for(matmul(size, size, size), "contraction", cpu)
        tall = space.cost({**tiles, "MR": 16, "NR": 16})
        wide = space.cost({**tiles, "MR": 8, "NR": 32})
        assert (tall > 1.5 * wide) == slower


def test_cost_prices_a_packed_nest_left_with_padded_register_tiles():
    # 4096 rows in tiles of 6: with K in one block no row tail is split off, so every
    # register tile of the packed nest is padded (packed_tails.PackedNest); with K in two
    # blocks the 4 rows past the last whole tile are split off and the nest stays static.
    op = matmul(4096, 4096, 256)
    space = space_for(op, "contraction", host())
    tiles = {"MC": 4096, "NC": 512, "MR": 6, "NR": 64, "KU": 1, "ORDER": 1, "PACK": 1}
    one_block, two_blocks = ({**tiles, "KC": kc, "PREFETCH": 0, "UNIT": 0} for kc in (256, 128))
    one, two = (CONTRACTION.knob_values(op, config) for config in (one_block, two_blocks))
    assert packed_nest(op, one).padded and not packed_nest(op, two).padded
    assert packed_nest(op, two).rows_past == 4
    assert space.cost(one_block) > 2 * space.cost(two_blocks)


@pytest.mark.parametrize(
    "overrides, conflicting",
    [
        ({"vector_registers": 4}, {"register_budget", "min_accumulators"}),
        # 16 bytes: not even the selector's one-row K blocks fit A's panel in L1.
        ({"l1d_bytes": 16}, {"a_panel_in_l1", "min_accumulators"}),
    ],
)
def test_empty_space_names_the_conflicting_constraints(overrides, conflicting):
    with pytest.raises(UsageError) as error:
        space_for(matmul(24, 32, 16), "contraction", host(**overrides))
    assert error.value.stage == "space"
    message = str(error.value)
    assert "empty search space" in message
    assert all(name in message for name in conflicting)


def test_uncovered_targets_and_roots_are_usage_errors():
    class Toy:
        name = "toy"

    with pytest.raises(UsageError, match="schedule contraction on target toy") as error:
        space_for(matmul(8, 8, 8), "contraction", Toy())
    assert error.value.stage == "space"
    with pytest.raises(UsageError, match="not conv2d"):
        space_for(CONV, "contraction", host())


def test_export_as_transform_tune_knobs():
    space = space_for(matmul(48, 80, 96), "contraction", host(l1d_bytes=8192, l2_bytes=16384))
    used = {name: sorted({c[name] for c in space.enumerate()}) for name in space.domains}
    with ir.Context(), ir.Location.unknown():
        module = space.to_transform_module()
        assert module.operation.verify()
        assert "transform.with_named_sequence" in module.operation.attributes
        parsed = ir.Module.parse(str(module))
        (sequence,) = parsed.body.operations
        knobs = [
            op
            for op in sequence.regions[0].blocks[0].operations
            if op.operation.name == "transform.tune.knob"
        ]
        assert [ir.StringAttr(op.attributes["name"]).value for op in knobs] == list(space.domains)
        for op in knobs:
            name = ir.StringAttr(op.attributes["name"]).value
            options = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["options"])]
            assert options == used[name]


@pytest.mark.parametrize(
    "name, tiny",
    [
        (
            "conv2d",
            {
                "OW_TILE": 1,
                "F_TILE": 16,
                "C_TILE": 1,
                "OH_TILE": 1,
                "FLAT_ROWS": 0,
                "PACK_FILTER": 0,
                "IMAGES_OUTER": 0,
            },
        ),
        ("reduction", {"ROWS": 1, "COLS": 16, "PREFETCH": 0}),
        ("elementwise", {"ROWS": 1, "COLS": 8}),
    ],
)
def test_cost_prefers_the_selector_to_a_tiny_tile(name, tiny):
    op, schedule, cpu = CASES[name]
    space = space_for(op, schedule, cpu)
    assert space.cost(tiny) > space.cost(FAMILIES[schedule].select(op, cpu))


def test_rowwise_cost_prices_the_prefetch_of_a_tile_beyond_the_l2():
    space = space_for(OpInfo("reduction", {"ROWS": 4096, "COLS": 4096}, F32), "rowwise", host())
    tile = {"ROWS": 4, "COLS": 16}
    assert space.cost({**tile, "PREFETCH": 1}) < space.cost({**tile, "PREFETCH": 0})
    small = space_for(OpInfo("reduction", {"ROWS": 32, "COLS": 256}, F32), "rowwise", host())
    assert small.cost({**tile, "PREFETCH": 1}) == small.cost({**tile, "PREFETCH": 0})


def test_fast_enumeration_matches_z3_and_its_integer_semantics(case):
    """The depth-first enumeration (constraints as Python predicates) finds exactly what
    z3's blocking-clause enumeration finds, on every packaged space and on negative
    operands of z3's div and mod; an untranslated operation falls back to z3."""
    from mlirtune.tune.space import Constraint, SearchSpace

    _, _, space = case
    assert space._walk() is not None
    assert sorted(space._walk()) == sorted(space._solve()) == space._all()
    x, y = z3.Int("x"), z3.Int("y")
    signed = [
        Constraint("div", "", z3.If(x / y >= -2, x % y == 1, z3.Distinct(x, y, -x))),
        Constraint("mod", "", z3.Implies(x - y > 0, (-x) % (y - 4) < 2)),
    ]
    toy = SearchSpace("toy", {"x": range(-7, 8), "y": (-3, -2, 2, 3)}, signed, lambda c: 0.0)
    assert toy._walk() is not None and sorted(toy._walk()) == sorted(toy._solve())
    assert toy.count() == len(toy._solve()) > 0
    for vx, vy in itertools.product(range(-7, 8), (-3, -2, 2, 3)):
        at = [(x, z3.IntVal(vx)), (y, z3.IntVal(vy))]
        by_z3 = [c.name for c in signed if z3.is_false(z3.simplify(z3.substitute(c.expr, *at)))]
        assert toy.violations({"x": vx, "y": vy}) == by_z3
    zero = SearchSpace("toy", {"x": (1, 2), "y": (0, 1)}, signed[:1], lambda c: 0.0)
    assert zero._walk() is None and zero.count() == len(zero._solve())  # x / 0: z3 decides
    power = Constraint("power", "", x**2 <= 9)  # not translated: z3 decides
    toy = SearchSpace("toy", {"x": range(-7, 8)}, [power], lambda c: 0.0)
    assert toy._predicates == [None] and toy.enumerate() == [{"x": v} for v in range(-3, 4)]


def test_neighbours_are_valid_configs_a_step_or_a_repaired_step_away():
    space = space_for(matmul(2048, 2048, 2048), "contraction", host(**INTEL))
    config = {"MC": 256, "NC": 256, "KC": 1024, "MR": 4, "NR": 64, "KU": 1, "ORDER": 1}
    config = {**config, "PACK": 1, "PREFETCH": 1, "UNIT": 0}
    neighbours = space.neighbours(config)
    assert neighbours and all(space.contains(c) for c in neighbours)
    for neighbour in neighbours:
        moved = [k for k in config if neighbour[k] != config[k]]
        assert 1 <= len(moved) <= 2
        for name in moved:
            values = space.domains[name]
            assert abs(values.index(neighbour[name]) - values.index(config[name])) == 1
    assert {**config, "KC": 512} in neighbours
    # KC=2048 puts B's block past half of L2's ways: repaired by a step down of NC.
    assert "packed_b_block_in_l2" in space.violations({**config, "KC": 2048})
    assert {**config, "KC": 2048, "NC": 128} in neighbours


@pytest.mark.parametrize("dims", [(4099, 2048, 2048), (768, 3072, 768), (1029, 5921, 2949)])
def test_the_selectors_config_lies_in_the_space_with_neighbours(dims):
    """Blocks the selector derives that are no knob candidate (MC=372 for the 4092 whole
    rows of a prime M, NC=1024 where the octave's candidate is 768) join the family's
    domains, so that the tuner's baseline is a config of its space and a guided search has
    its neighbours to start from."""
    op, cpu = matmul(*dims), host(**INTEL)
    family = FAMILIES["contraction"]
    plain = family.knob_domains(op, cpu)
    selected = family.select(op, cpu)
    assert any(value not in plain[name] for name, value in selected.items() if name in plain)
    assert not family.violations(op, cpu, {**selected, "KU": 1, "ORDER": 1})
    space = space_for(op, "contraction", cpu)
    baseline = {name: selected.get(name, values[0]) for name, values in space.domains.items()}
    baseline |= {"KU": 1, "ORDER": 1}
    assert space.contains(baseline)
    assert space.neighbours(baseline)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_a_one_row_product_whose_columns_leave_wide_tails_has_a_space(isa):
    """1 x 1000 x 512 (a classifier's Linear at batch 1): on AVX-512 the most accumulators
    the candidates reached were at NR=64, whose tails are 40 wide against every NC, and the
    space was empty; the floor now counts only the NR some NC tiles with narrow tails."""
    space = space_for(matmul(1, 1000, 512), "contraction", host(isa=isa))
    assert space.count() > 0
