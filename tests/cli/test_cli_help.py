"""`--help` teaches: each command has its own description and working examples, and states
its defaults; count messages are pluralised; the tune header is not wrapped."""

import argparse
import io
import re
import shlex

import pytest
from rich.console import Console

from mlirtune.cli import _parser, main
from mlirtune.cli.common import plural, workload_of
from mlirtune.cli.tune_report import print_plain
from mlirtune.tune.strategies import STRATEGIES

COMMANDS = ["list", "pipelines", "run", "bench", "opt", "tune"]


def help_of(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 0 and err == ""
    return " ".join(out.split())  # argparse wraps option help: compare with spaces collapsed


def examples_of(command: str) -> list[str]:
    parser = _subparser(command)
    block = parser.epilog.split("examples:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def _subparser(command: str) -> argparse.ArgumentParser:
    (subparsers,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return subparsers.choices[command]


def test_top_level_help_gives_overview_examples_and_exit_codes(capsys):
    text = help_of(capsys)
    for command in [*COMMANDS, "db", "specs"]:
        assert re.search(rf"\b{command}\b \w", text), command
    assert "examples:" in text and "mlirtune tune matmul" in text
    assert "Exit codes: 0 success, 1 verification failed, 2 bad input" in text


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_its_own_description_and_examples(capsys, command):
    description = " ".join(_subparser(command).description.split())
    assert description in help_of(capsys, command)
    assert len(description) > 80 and "Lower, run, verify, benchmark and tune" not in description
    others = [c for c in COMMANDS if c != command]
    assert all(description != " ".join(_subparser(c).description.split()) for c in others)
    examples = examples_of(command)
    assert examples and all(e.startswith("mlirtune ") for e in examples)
    assert any(e.startswith(f"mlirtune {command}") for e in examples)
    assert not any(e.startswith("mlirtune db") or e.startswith("mlirtune specs") for e in examples)


@pytest.mark.parametrize("command", COMMANDS)
def test_examples_are_valid_commands(command):
    """Every example parses, and its built-in workload options exist."""
    for example in examples_of(command):
        args = _parser().parse_args(shlex.split(example)[1:])
        if getattr(args, "workload", None) and not args.payload:
            assert workload_of(args).describe()["name"] == args.workload


def _options_with_defaults(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _options_with_defaults(sub)
        elif action.option_strings and action.default not in (None, False, [], "==SUPPRESS=="):
            yield parser.prog, action


def test_every_option_default_is_stated():
    stated = list(_options_with_defaults(_parser()))
    assert len(stated) > 10
    for prog, action in stated:
        assert "default" in (action.help or ""), f"{prog} {action.option_strings[0]}"


@pytest.mark.parametrize(
    ("command", "phrases"),
    [
        ("bench", ["--max-time S time cap per measurement in seconds, > 0 (default: 1.0)"]),
        ("run", ["--entry NAME entry function of --payload (default: payload)"]),
        ("opt", ["(default: host", "(default: looked up by workload"]),
        (
            "tune",
            [
                "--budget N evaluate at most N candidates, N >= 1 (default: none",
                "with neither, tune exits with an error",
                "--finalists N fastest candidates raced against the baseline, N >= 1 (default: 3)",
                "(default: one per usable core, at least 2",
                "0 to 4294967295 (default: 0)",
                "(default: tpe",
                "(default: $MLIRTUNE_DB",
            ],
        ),
    ],
)
def test_defaults_are_stated(capsys, command, phrases):
    text = help_of(capsys, command)
    for phrase in phrases:
        assert phrase in text


def test_strategy_lists_its_choices_and_descriptions(capsys):
    text = help_of(capsys, "tune")
    assert f"--strategy {{{','.join(STRATEGIES)}}}" in text
    for name, cls in STRATEGIES.items():
        assert f"{name} {' '.join(cls.description.split())}" in text


def test_plural():
    assert plural(1, "entry") == "1 entry"
    assert plural(0, "entry") == "0 entries"
    assert plural(2, "config") == "2 configs"
    assert plural(3, "library") == "3 libraries"
    assert plural(2, "key") == "2 keys"
    assert plural(2, "matrix", "matrices") == "2 matrices"


def test_tune_header_lines_are_not_wrapped_or_highlighted():
    stream = io.StringIO()
    console = Console(file=stream, width=80, force_terminal=False)
    long_path = "/tmp/" + "a-very-long-directory-name/" * 4 + "tuning.db"
    print_plain(console, "tuning matmul M=512 [x]", f"  database {long_path}")
    assert stream.getvalue() == f"tuning matmul M=512 [x]\n  database {long_path}\n"
