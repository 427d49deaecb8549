"""The IREE lowering-config space: its constraints against brute force, its attributes."""

from __future__ import annotations

import itertools

import pytest

from mlirtune.iree.tiles import (
    IREE_DEFAULT,
    KNOBS,
    LARGE_VECTOR_BYTES,
    IreeRoot,
    lowering_config,
    search_space,
)
from tests.cpu_classes import cpu

MATMUL = IreeRoot(
    "dispatch.mlir",
    "payload_dispatch_0_matmul_24x40x16_f32",
    "linalg.matmul",
    (24, 40, 16),
    ("f32", "f32", "f32"),
    "contraction",
    {"batch": (), "m": (0,), "n": (1,), "k": (2,)},
)
CONV = IreeRoot(
    "dispatch.mlir",
    "payload_dispatch_0_conv",
    "linalg.conv_2d_nhwc_hwcf",
    (1, 8, 8, 32, 3, 3, 16),
    ("f32", "f32", "f32"),
    "convolution",
    {"batch": (0,), "m": (1, 2), "n": (3,), "k": (4, 5, 6)},
)


def _valid_by_hand(config: dict[str, int], lanes: int, registers: int) -> bool:
    """The space's rules, written out: IREE's own config, or every knob set with whole
    register tiles in the workgroup tile, the accumulators, a row of B and a broadcast in
    registers, and products under IREE's large-vector limit."""
    if all(value == 0 for value in config.values()):
        return True
    if any(value == 0 for value in config.values()):
        return False
    vectors = config["VEC_N"] // lanes
    return (
        config["TILE_M"] % config["VEC_M"] == 0
        and config["TILE_N"] % config["VEC_N"] == 0
        and config["VEC_M"] * vectors + vectors + 1 <= registers
        and config["VEC_M"] * config["VEC_N"] * config["VEC_K"] * 4 < LARGE_VECTOR_BYTES
    )


@pytest.mark.parametrize("cpu_class", ["avx2", "avx512"])
def test_the_space_is_its_rules_by_brute_force(cpu_class):
    target = cpu(cpu_class)
    space = search_space(MATMUL, target)
    lanes, registers = target.lanes("f32"), target.features.vector_registers
    every = [
        dict(zip(space.domains, values, strict=True))
        for values in itertools.product(*space.domains.values())
    ]
    expected = [c for c in every if _valid_by_hand(c, lanes, registers)]
    assert sorted(map(tuple, (c.values() for c in space.enumerate()))) == sorted(
        tuple(c.values()) for c in expected
    )
    assert IREE_DEFAULT in space.enumerate()
    assert 0 < len(expected) < len(every)


def test_vector_columns_are_whole_vectors_of_the_target():
    for cpu_class, lanes in (("avx2", 8), ("avx512", 16)):
        space = search_space(MATMUL, cpu(cpu_class))
        assert all(v % lanes == 0 for v in space.domains["VEC_N"])


def test_a_contraction_config_sets_the_four_levels_on_its_loops():
    config = {"TILE_M": 12, "TILE_N": 16, "VEC_M": 6, "VEC_N": 16, "VEC_K": 2}
    assert lowering_config(MATMUL, config) == (
        "#iree_cpu.lowering_config<distribution = [12, 16, 0], cache_parallel = [12, 16, 0], "
        "vector_common_parallel = [6, 16, 0], vector_reduction = [0, 0, 2]>"
    )


def test_a_convolution_config_tiles_pixels_and_channels_and_steps_input_channels():
    config = {"TILE_M": 8, "TILE_N": 32, "VEC_M": 4, "VEC_N": 16, "VEC_K": 4}
    # n, oh, ow, f, kh, kw, c: the output row's pixels and the output channels tiled, the
    # filter window stepped one by one, the input channels by VEC_K; no cache level.
    assert lowering_config(CONV, config) == (
        "#iree_cpu.lowering_config<distribution = [1, 1, 8, 32, 0, 0, 0], "
        "vector_common_parallel = [1, 1, 4, 16, 0, 0, 0], vector_reduction = [0, 0, 0, 0, 1, 1, 4]>"
    )


def test_a_root_without_reduction_loops_is_not_tuned():
    copy = IreeRoot(
        "d.mlir", "payload_dispatch_0_slow_memcpy", "linalg.generic", (8, 8), ("f32",), None, None
    )
    with pytest.raises(Exception, match="only contraction and convolution roots"):
        search_space(copy, cpu("avx2"))
    assert set(KNOBS) == set(IREE_DEFAULT)
