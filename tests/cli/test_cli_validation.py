"""Numeric CLI options are checked when the command line is parsed: a bad value is one line
on stderr naming the option and the allowed range, with exit status 2 and no traceback."""

import argparse
import os

import pytest

from mlirtune.cli import _parser, main
from mlirtune.cli.common import SEED_MAX, integer, seconds

CORES = os.cpu_count() or 1

BAD = [
    (["tune", "matmul", "--workers", "0"], "--workers", "must be a positive number"),
    (["tune", "matmul", "--workers", "-2"], "--workers", "must be a positive number"),
    (["tune", "matmul", "--finalists", "-1"], "--finalists", "must be a positive number"),
    (["tune", "matmul", "--finalists", "0"], "--finalists", "must be a positive number"),
    (["tune", "matmul", "--budget", "0"], "--budget", "must be a positive number"),
    (["tune", "matmul", "--budget", "-3"], "--budget", "must be a positive number"),
    (["tune", "matmul", "--budget", "2.5"], "--budget", "(an integer >= 1), not '2.5'"),
    (["tune", "matmul", "--time-limit", "0"], "--time-limit", "must be positive and finite"),
    (["tune", "matmul", "--time-limit", "-1"], "--time-limit", "must be positive and finite"),
    (["tune", "matmul", "--time-limit", "nan"], "--time-limit", "must be positive and finite"),
    (["tune", "matmul", "--time-limit", "inf"], "--time-limit", "must be positive and finite"),
    (["tune", "matmul", "--seed", "-1"], "--seed", f"from 0 to {SEED_MAX}"),
    (["tune", "matmul", "--seed", str(SEED_MAX + 1)], "--seed", f"from 0 to {SEED_MAX}"),
    (["tune", "matmul", "--seed", "x"], "--seed", f"from 0 to {SEED_MAX}"),
    (["tune", "matmul", "--strategy", "annealing"], "--strategy", "unknown strategy 'annealing'"),
    (["bench", "matmul", "--max-time", "0"], "--max-time", "must be positive and finite"),
    (["bench", "matmul", "--max-time", "-1"], "--max-time", "must be positive and finite"),
    (["bench", "matmul", "--max-time", "nan"], "--max-time", "must be positive and finite"),
    (["bench", "matmul", "--max-time=-inf"], "--max-time", "must be positive and finite"),
    (["bench", "matmul", "--max-time", "soon"], "--max-time", "number of seconds"),
    (["db", "show", "matmul", "--limit", "-1"], "--limit", "must be a non-negative number"),
    (["db", "show", "matmul", "--limit", "many"], "--limit", "must be a non-negative number"),
    (["bench", "matmul", "--threads", "-1"], "--threads", f"from 0 to {CORES}"),
    (["tune", "matmul", "--threads", str(CORES + 1)], "--threads", f"from 0 to {CORES}"),
    (["run", "matmul", "--threads", "two"], "--threads", f"from 0 to {CORES}"),
]


@pytest.mark.parametrize(("argv", "option", "allowed"), BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_numeric_value_is_one_line_exit_2(capsys, argv, option, allowed):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert option in err and allowed in err
    assert err.startswith(f"mlirtune {argv[0]}")


@pytest.mark.jit
@pytest.mark.subprocess
def test_tune_without_budget_or_time_limit_is_one_line_exit_2(capsys):
    assert main(["tune", "matmul", "M=16", "N=16", "K=16"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "--budget" in err and "--time-limit" in err and "Traceback" not in err


def test_missing_command_is_one_line(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "COMMAND" in err


@pytest.mark.parametrize(
    ("argv", "name", "value"),
    [
        (["tune", "matmul", "--workers", "1"], "workers", 1),
        (["tune", "matmul", "--finalists", "1"], "finalists", 1),
        (["tune", "matmul", "--budget", "1"], "budget", 1),
        (["tune", "matmul", "--seed", "0"], "seed", 0),
        (["tune", "matmul", "--seed", str(SEED_MAX)], "seed", SEED_MAX),
        (["tune", "matmul", "--time-limit", "0.5"], "time_limit", 0.5),
        (["bench", "matmul", "--max-time", "1e-3"], "max_time", 1e-3),
        (["db", "show", "matmul", "--limit", "0"], "limit", 0),
        (["tune", "matmul", "--threads", "0"], "threads", CORES),  # 0: every core
        (["bench", "matmul", "--threads", str(CORES)], "threads", CORES),
    ],
)
def test_boundary_values_are_accepted(argv, name, value):
    assert getattr(_parser().parse_args(argv), name) == value


@pytest.mark.jit
@pytest.mark.subprocess
def test_defaults_parse_unchanged():
    args = _parser().parse_args(["tune", "matmul"])
    assert (args.budget, args.time_limit, args.workers) == (None, None, None)
    assert (args.seed, args.finalists, args.strategy) == (0, 3, "tpe")
    assert _parser().parse_args(["bench", "matmul"]).max_time == 1.0


def test_type_functions_name_the_range():
    assert integer(2, 5)("5") == 5
    with pytest.raises(argparse.ArgumentTypeError, match="from 2 to 5, not 6"):
        integer(2, 5)("6")
    with pytest.raises(argparse.ArgumentTypeError, match="an integer >= 7, not 6"):
        integer(7)("6")
    assert seconds("2") == 2.0
    with pytest.raises(argparse.ArgumentTypeError, match="not 0"):
        seconds("0")
