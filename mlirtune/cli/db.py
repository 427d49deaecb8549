"""`mlirtune db`: list, show and export what the tuning database holds."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import IO, Any

from mlirtune.cli.common import add_command_group, add_db_argument
from mlirtune.errors import UsageError
from mlirtune.tune.db import Record, TuningDB, WorkloadSummary, current_hashes

EPILOG = """\
examples:
  mlirtune db list
  mlirtune db list --all --db /tmp/tuning.db
  mlirtune db show matmul
  mlirtune db show 3fa2 --limit 50
  mlirtune db export --format csv -o records.csv
  mlirtune db export --workload matmul --format json

The database is --db, else $MLIRTUNE_DB, else $XDG_CACHE_HOME/mlirtune/tuning.db, else
~/.cache/mlirtune/tuning.db. A record is current when it was measured on this CPU (same
target fingerprint) with the installed MLIR toolchain; other records are kept as history.
WORKLOAD is a workload name or a prefix of its hash, as `db list` shows it.
"""
HASH_SHOWN = 8
DETAIL_SHOWN = 60
LISTED = 10


def add_db_parser(subparsers: Any) -> None:
    """Register `db` and its commands on the `mlirtune` command parser."""
    text = "inspect the tuning database (list, show, export)"
    add = add_command_group(subparsers, "db", text, EPILOG)

    def command(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        cmd = add(name, help_text, handler)
        add_db_argument(cmd)
        return cmd

    listing = command("list", "one line per workload: records and best throughput", _cmd_list)
    listing.add_argument(
        "--all",
        action="store_true",
        help="also workloads with no record on this target and toolchain",
    )
    show = command("show", "the history of one workload, oldest first", _cmd_show)
    show.add_argument("workload", metavar="WORKLOAD", help="workload name or hash prefix")
    show.add_argument(
        "--limit",
        type=int,
        default=20,
        metavar="N",
        help="show the newest N records (default 20; 0 shows all)",
    )
    export = command("export", "every field of every record, raw samples included", _cmd_export)
    export.add_argument("--workload", metavar="WORKLOAD", help="only this workload")
    export.add_argument(
        "--format", choices=["json", "csv"], default="json", help="output format (default json)"
    )
    export.add_argument("-o", "--output", type=Path, metavar="FILE", help="write to FILE")


# --- commands ----------------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace) -> int:
    with TuningDB(args.db, create=False) as db:
        target_hash, toolchain_hash = current_hashes()
        summaries = db.workloads(target_hash=target_hash, toolchain_hash=toolchain_hash)
    shown = [s for s in summaries if args.all or s.current]
    print(f"database: {db.path}")
    print(f"current: target {target_hash[:HASH_SHOWN]}, toolchain {toolchain_hash[:HASH_SHOWN]}")
    if not shown:
        hidden = len(summaries) - len(shown)
        more = f" ({hidden} from other targets or toolchains: --all)" if hidden else ""
        print(f"no workloads with current records{more}")
        return 0
    rows = [
        [
            s.hash[:HASH_SHOWN],
            _label(s.workload),
            str(s.records),
            str(s.current),
            str(s.ok),
            _number(s.best_gflops, ".2f"),
        ]
        for s in shown
    ]
    headers = ["hash", "workload", "records", "current", "ok", "best GFLOP/s"]
    _print_table(headers, rows, right={2, 3, 4, 5})
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    if args.limit < 0:
        raise UsageError(f"--limit {args.limit} is negative", stage="db")
    with TuningDB(args.db, create=False) as db:
        summary = _select(db.workloads(), args.workload)
        records = db.records(workload_hash=summary.hash)
    target_hash, toolchain_hash = current_hashes()
    shown = records[-args.limit :] if args.limit else records
    print(f"{_label(summary.workload)}  (workload {summary.hash})")
    if len(shown) < len(records):
        print(f"newest {len(shown)} of {len(records)} records (--limit 0 shows all)")
    rows = [
        [
            r.created_at,
            r.role,
            r.status,
            _number(r.median_s * 1e3 if r.median_s else None, ".4f"),
            _number(r.gflops, ".2f"),
            "yes" if r.is_current(target_hash, toolchain_hash) else "no",
            r.pipeline,
            " ".join(f"{k}={v}" for k, v in r.params.items()) or "-",
            _short(r.detail),
        ]
        for r in shown
    ]
    headers = ["time", "role", "status", "median ms", "GFLOP/s", "current", "pipeline", "params"]
    _print_table([*headers, "detail"], rows, right={3, 4})
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    with TuningDB(args.db, create=False) as db:
        if args.workload:
            records = db.records(workload_hash=_select(db.workloads(), args.workload).hash)
        else:
            records = db.records()
    if args.output is None:
        _write_records(records, args.format, sys.stdout)
        return 0
    try:
        with args.output.open("w", newline="") as stream:
            _write_records(records, args.format, stream)
    except OSError as error:
        raise UsageError(f"cannot write {args.output}: {error.strerror}", stage="db") from None
    print(f"wrote {len(records)} records to {args.output}", file=sys.stderr)
    return 0


# --- helpers -----------------------------------------------------------------------------


def _select(summaries: list[WorkloadSummary], selector: str) -> WorkloadSummary:
    """The one workload whose hash starts with `selector`, else whose name is `selector`."""
    matches = [s for s in summaries if s.workload.get("name") == selector]
    if not matches:
        matches = [s for s in summaries if s.hash.startswith(selector.lower())]
    if len(matches) == 1:
        return matches[0]
    if matches:
        problem = f"{selector!r} matches {len(matches)} workloads, give a hash prefix"
    else:
        problem, matches = f"no workload matches {selector!r}; known", summaries
    listed = [f"{s.hash[:HASH_SHOWN]} {_label(s.workload)}" for s in matches[:LISTED]]
    if len(matches) > LISTED:
        listed.append(f"... {len(matches) - LISTED} more (see db list --all)")
    raise UsageError(f"{problem}: {'; '.join(listed) or 'none, the database is empty'}", stage="db")


def _write_records(records: list[Record], output_format: str, stream: IO[str]) -> None:
    if output_format == "json":
        json.dump([r.to_json() for r in records], stream, indent=2)
        stream.write("\n")
        return
    columns = [f.name for f in fields(Record)]
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(columns)
    for record in records:
        row = record.to_json()
        writer.writerow([_cell(row[column]) for column in columns])


def _cell(value: Any) -> Any:
    """A CSV cell: nested values (params, samples, statistics, ...) as JSON text."""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return "" if value is None else value


def _label(workload: dict[str, Any]) -> str:
    options = " ".join(f"{k}={v}" for k, v in sorted(workload.get("options", {}).items()))
    return f"{workload.get('name', '?')} {options}".strip()


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _short(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= DETAIL_SHOWN else line[: DETAIL_SHOWN - 3] + "..."


def _print_table(headers: Sequence[str], rows: list[list[str]], *, right: set[int]) -> None:
    """Columns padded to their widest cell; `right` holds the right-aligned (numeric) ones."""
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    for row in [headers, *rows]:
        cells = [
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())
