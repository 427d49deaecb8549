"""`mlirtune suite list | run | compare` and `mlirtune report`: benchmark suites, CI
verdicts and an HTML report of their results."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mlirtune.cli.common import add_command, add_command_group, integer, plural, split_list
from mlirtune.interfaces.errors import UsageError

if TYPE_CHECKING:
    from mlirtune.suite.definition import Suite
    from mlirtune.suite.results import EntryResult

EPILOG = """\
examples:
  mlirtune suite list
  mlirtune suite list kernelbench-l1
  mlirtune suite run smoke -o results.json
  mlirtune suite run gemm -o gemm.json --tags llm,bert
  mlirtune suite run my-suite.yaml -o mine.json --filter 'matmul-.*' --rerun
  mlirtune suite run --problems problems/ -o problems.json --batch 8
  mlirtune suite run --problems problems/ -o problems.json --dispatch-times
  mlirtune suite compare base.json results.json --threshold 3%
  mlirtune suite compare base.json results.json --format markdown >> comment.md
  mlirtune report results.json --baseline base.json -o report.html

A suite is a YAML file of entries (a built-in workload with options, or --payload-style
`payload` and `entry`), each with optional pipeline, params, specs, threads, baselines
(numpy, torch) and tags; the shipped suites (`suite list`) are named without a path.
`suite run` keeps every sample in its output and resumes it after a kill.
"""
LIST = (
    "Without a suite: the shipped suites, each with its entry count, tags and description. "
    "With one: its entries, each with its workload and options, baselines and tags (the "
    "names --filter matches, the tags --tags selects)."
)
RUN = (
    "Verify and time every entry of a suite (with its baselines) into a results file: every "
    "raw sample, the statistics, the config and where it came from, and a manifest of the "
    "host, toolchain, measured peak and command. An entry that fails is recorded and the run "
    "goes on. The file is saved after each entry; run the same command again to resume "
    "(entries already in it are skipped unless --rerun)."
)
COMPARE = (
    "Compare two results files entry by entry: the ratio of median times (BASE / NEW, above "
    "1 is faster) with a 95% bootstrap interval from the stored samples, and a verdict. An "
    "entry regressed when the whole interval lies below 1 - threshold, improved when above "
    "1 + threshold. Exit 1 when any entry regressed or failed, 0 otherwise."
)
REPORT = (
    "Write one self-contained HTML file (images embedded) from a results file: GFLOP/s "
    "against each baseline, % of the measured peak, a roofline, sample distributions, the "
    "comparison with --baseline, and tuning progress from a tuning database."
)
REPORT_EPILOG = """\
examples:
  mlirtune report results.json -o report.html
  mlirtune report results.json --baseline base.json --db tuning.db -o report.html
"""


def add_suite_parser(commands: Any) -> None:
    """Register `suite` (run, compare) and `report` on the `mlirtune` command parser."""
    from mlirtune.suite.definition import shipped_names

    add = add_command_group(commands, "suite", "list, run and compare benchmark suites", EPILOG)
    listing = add("list", "list the shipped suites, or one suite's entries", cmd_list, LIST)
    listing.add_argument("suite", nargs="?", help="a suite file or a shipped suite's name")
    run = add("run", "time a suite's entries into a results file", cmd_run, RUN, EPILOG)
    run.add_argument(
        "suite", nargs="?", help=f"a suite file, or a shipped suite: {shipped_names()}"
    )
    run.add_argument(
        "--problems",
        type=Path,
        metavar="DIR",
        help="instead of a suite: every problem file in DIR (Model, get_inputs, "
        "get_init_inputs), each verified and timed against torch eager",
    )
    run.add_argument(
        "--batch", type=integer(1), metavar="N", help="with --problems: each file's batch_size"
    )
    run.add_argument(
        "--threads", type=integer(1), metavar="N", help="with --problems: threads (default 1)"
    )
    run.add_argument("-o", "--output", type=Path, required=True, help="results file (JSON)")
    run.add_argument("--tags", help="run only entries with any of these tags (comma-separated)")
    run.add_argument("--filter", metavar="REGEX", help="run only entries whose name matches")
    run.add_argument("--rerun", action="store_true", help="run entries already in the output")
    run.add_argument(
        "--dispatch-times",
        action="store_true",
        help="also time each distinct dispatch of a split payload (a model) alone, on the "
        "values it reads there: where its time went, in the results and the report",
    )
    compare = add("compare", "compare two results files", cmd_compare, COMPARE, EPILOG)
    compare.add_argument("base", type=Path, help="results of the reference run")
    compare.add_argument("new", type=Path, help="results of the run to judge")
    compare.add_argument(
        "--threshold",
        type=_fraction,
        default=0.03,
        metavar="P%",
        help="change below which nothing is flagged, e.g. 3%% or 0.03 (default: 3%%)",
    )
    compare.add_argument(
        "--format",
        choices=["table", "json", "markdown"],
        default="table",
        help="output: a table on the terminal, JSON, or Markdown for a CI comment (default: "
        "%(default)s)",
    )
    report = add_command(commands, "report", "write an HTML report", REPORT_EPILOG, REPORT)
    report.add_argument("results", type=Path, help="results file of `suite run`")
    report.add_argument("--baseline", type=Path, help="results to compare against")
    report.add_argument("--db", type=Path, help="tuning database to chart")
    report.add_argument("-o", "--output", type=Path, required=True, help="HTML file to write")
    report.set_defaults(handler=cmd_report)


def _fraction(text: str) -> float:
    """An argparse `type=`: `3%` or `0.03`, from 0 to 1."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction such as 3% or 0.03") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a fraction from 0 to 1 (0% to 100%)")
    return value


def cmd_list(args: argparse.Namespace) -> int:
    from mlirtune.suite.definition import load_suite, shipped_suites

    if args.suite is None:
        table = Table("suite", "entries", "tags", "description", title="shipped suites")
        for name in shipped_suites():
            suite = load_suite(name)
            tags = sorted({tag for entry in suite.entries for tag in entry.tags})
            table.add_row(name, str(len(suite.entries)), ", ".join(tags), suite.description)
    else:
        suite = load_suite(args.suite)
        table = Table("entry", "workload", "baselines", "tags", title=str(suite.path))
        for entry in suite.entries:
            options = " ".join(f"{key}={value}" for key, value in entry.options.items())
            what = f"{entry.workload} {options}" if entry.workload else entry.source
            table.add_row(entry.name, what, ", ".join(entry.baselines), ", ".join(entry.tags))
        table.caption = suite.description
    Console().print(table)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from mlirtune.suite.runner import run_suite

    suite = _suite_to_run(args)
    entries = suite.select(split_list(args.tags), args.filter)
    if not entries:
        raise UsageError(f"{suite.path}: no entry matches --tags/--filter")
    console = Console(stderr=True)
    if args.output.exists() and not args.rerun:
        from mlirtune.suite.results import load_results

        kept = [e.name for e in entries if e.name in load_results(args.output).entries]
        if kept:
            console.print(f"resuming {args.output}: {plural(len(kept), 'entry', 'entries')} "
                          "already there are not run again (--rerun runs them)")  # fmt: skip
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(suite.name, total=None)

        def advance(entry, position: int, count: int) -> None:
            bar.update(task, completed=position, total=count, description=entry.name)

        results = run_suite(
            suite, args.output, entries, rerun=args.rerun, command=sys.argv, progress=advance
        )
    table = Table("entry", "status", "ours GFLOP/s", "baselines", title=suite.name)
    for entry in entries:
        result = results.entries[entry.name]
        ours = result.ours.gflops if result.ours and result.ours.gflops else None
        baselines = ", ".join(
            f"{name} {ours_ratio(result.ours.median_s, t.median_s)}"
            for name, t in result.baselines.items()
            if result.ours
        )
        status = result.status if not result.error else f"{result.status}: {result.error[:60]}"
        table.add_row(entry.name, status, f"{ours:.1f}" if ours else "-", baselines or "-")
    ran = [results.entries[entry.name] for entry in entries]
    table.caption = f"{status_summary(ran)}; {speedup_summary(ran)}".rstrip("; ")
    Console().print(table)
    print(f"results: {args.output}")
    return 0


def _suite_to_run(args: argparse.Namespace) -> Suite:
    """The suite `suite run` names, or the one --problems makes of a folder."""
    from mlirtune.suite.definition import load_suite, problems_suite

    if (args.suite is None) == (args.problems is None):
        raise UsageError("give a suite, or --problems DIR, one of them")
    if args.problems is None:
        if args.batch is not None or args.threads is not None:
            raise UsageError("--batch and --threads go with --problems; a suite sets its own")
        suite = load_suite(args.suite)
        if args.dispatch_times:
            entries = tuple(replace(e, dispatch_times=True) for e in suite.entries)
            suite = replace(suite, entries=entries)
        return suite
    return problems_suite(args.problems, args.batch, args.threads or 1, args.dispatch_times)


def status_summary(results: list[EntryResult]) -> str:
    """How many entries ended in each status, e.g. `ok 58, refused 1, failed 1`."""
    counts = Counter(result.status for result in results)
    return ", ".join(f"{status} {count}" for status, count in counts.most_common())


def speedup_summary(results: list[EntryResult]) -> str:
    """Per baseline: the geometric mean of ours' speedup over the entries it timed, and the
    slowest entry's."""
    import numpy as np

    parts = []
    names = sorted({name for result in results if result.ours for name in result.baselines})
    for name in names:
        ratios = {
            result.name: result.baselines[name].median_s / result.ours.median_s
            for result in results
            if result.ours and name in result.baselines
        }
        worst = min(ratios, key=ratios.__getitem__)
        mean = float(np.exp(np.mean(np.log(list(ratios.values())))))
        parts.append(
            f"vs {name}: geometric mean {mean:.2f}x over {len(ratios)}, "
            f"lowest {ratios[worst]:.2f}x ({worst})"
        )
    return "; ".join(parts)


def ours_ratio(ours_s: float, theirs_s: float) -> str:
    """How many times faster ours ran than a baseline, as printed in tables."""
    return f"{theirs_s / ours_s:.2f}x"


def cmd_compare(args: argparse.Namespace) -> int:
    from mlirtune.suite.compare import FAILING, compare_results
    from mlirtune.suite.results import load_results

    base, new = load_results(args.base), load_results(args.new)
    for what in ("target", "toolchain"):
        if getattr(base.manifest, what) != getattr(new.manifest, what):
            warnings.warn(
                f"the two runs' {what}s differ: ratios compare unlike things", stacklevel=1
            )
    comparisons = compare_results(base, new, args.threshold)
    if args.format == "json":
        print(json.dumps([asdict(c) for c in comparisons], indent=1))
    else:
        rows = [
            (
                c.name,
                c.verdict,
                f"{c.ratio:.3f}" if c.ratio else "-",
                f"[{c.ci_low:.3f}, {c.ci_high:.3f}]" if c.ci_low else "-",
                c.note,
            )
            for c in comparisons
        ]
        header = ("entry", "verdict", "ratio", "95% CI", "note")
        if args.format == "markdown":
            print("| " + " | ".join(header) + " |")
            print("|" + "---|" * len(header))
            for row in rows:
                print("| " + " | ".join(row) + " |")
        else:
            table = Table(*header, title=f"{args.base} -> {args.new} (ratio > 1: faster)")
            for row in rows:
                table.add_row(*row)
            Console().print(table)
    return 1 if any(c.verdict in FAILING for c in comparisons) else 0


def cmd_report(args: argparse.Namespace) -> int:
    from mlirtune.suite.report import write_report
    from mlirtune.suite.results import load_results

    baseline = load_results(args.baseline) if args.baseline else None
    write_report(load_results(args.results), args.output, baseline, args.db)
    print(f"report: {args.output}")
    return 0
