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

from mlirtune.cli.common import add_command_group, add_db_argument, integer, plural
from mlirtune.interfaces.errors import UsageError
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
WORKLOAD is a workload name or a prefix of its hash, as `db list` shows it; when a name
matches several workloads (e.g. two matmul shapes), the error lists each one's hash prefix.
These commands only read: they work on a database in a read-only folder and never change it.
"""
HASH_SHOWN = 8
DETAIL_SHOWN = 60
LISTED = 10
# Fields of a stored workload identity, besides its options, that can tell two apart.
IDENTITY = ("kind", "dtypes", "shapes", "payload_hash")


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
        type=integer(0),
        default=20,
        metavar="N",
        help="show the newest N records, N >= 0 (default: %(default)s; 0 shows all)",
    )
    export = command("export", "every field of every record, raw samples included", _cmd_export)
    export.add_argument("--workload", metavar="WORKLOAD", help="only this workload")
    export.add_argument(
        "--format",
        choices=["json", "csv"],
        default="json",
        help="output format (default: %(default)s)",
    )
    export.add_argument(
        "-o", "--output", type=Path, metavar="FILE", help="write to FILE (default: stdout)"
    )


# --- commands ----------------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace) -> int:
    with TuningDB(args.db, readonly=True) as db:
        target_hash, toolchain_hashes = current_hashes()
        summaries = db.workloads(target_hash=target_hash, toolchain_hashes=toolchain_hashes)
    shown = [s for s in summaries if args.all or s.current]
    print(f"database: {db.path}")
    toolchains = " or ".join(h[:HASH_SHOWN] for h in toolchain_hashes)
    print(f"current: target {target_hash[:HASH_SHOWN]}, toolchain {toolchains} (ours or IREE's)")
    if not shown:
        hidden = len(summaries) - len(shown)
        more = f" ({hidden} from other targets or toolchains: --all)" if hidden else ""
        print(f"no workloads with current records{more}")
        return 0
    width = _prefix_width(summaries)
    labels = _labels([s.workload for s in shown])
    rows = [
        [
            s.hash[:width],
            labels[i],
            str(s.records),
            str(s.current),
            str(s.ok),
            _number(s.best_gflops, ".2f"),
        ]
        for i, s in enumerate(shown)
    ]
    headers = ["hash", "workload", "records", "current", "ok", "best GFLOP/s"]
    _print_table(headers, rows, right={2, 3, 4, 5})
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    if args.limit < 0:
        raise UsageError(f"--limit {args.limit} is negative", stage="db")
    with TuningDB(args.db, readonly=True) as db:
        summary = _select(db.workloads(), args.workload)
        records = db.records(workload_hash=summary.hash)
    target_hash, toolchain_hashes = current_hashes()
    shown = records[-args.limit :] if args.limit else records
    print(f"{_labels([summary.workload])[0]}  (workload {summary.hash})")
    if len(shown) < len(records):
        print(f"newest {len(shown)} of {len(records)} records (--limit 0 shows all)")
    rows = [
        [
            r.created_at,
            r.role,
            r.status,
            _number(r.median_s * 1e3 if r.median_s else None, ".4f"),
            _number(r.gflops, ".2f"),
            "yes" if r.is_current(target_hash, toolchain_hashes) else "no",
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
    with TuningDB(args.db, readonly=True) as db:
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
    print(f"wrote {plural(len(records), 'record')} to {args.output}", file=sys.stderr)
    return 0


# --- helpers -----------------------------------------------------------------------------


def _select(summaries: list[WorkloadSummary], selector: str) -> WorkloadSummary:
    """The one workload named `selector`, else the one whose hash starts with it. When
    several match, the error lists each one's hash prefix and what sets it apart."""
    matches = [s for s in summaries if s.workload.get("name") == selector]
    if not matches:
        matches = [s for s in summaries if s.hash.startswith(selector.lower())]
    if len(matches) == 1:
        return matches[0]
    width = _prefix_width(summaries)
    if matches:
        labels = _labels([s.workload for s in matches], full=False)
        problem = f"{selector!r} matches {len(matches)} workloads; name one by its hash prefix"
    else:
        labels = _labels([s.workload for s in summaries])
        problem, matches = f"no workload matches {selector!r}; known", summaries
    listed = [f"{s.hash[:width]} ({label})" for s, label in zip(matches, labels, strict=True)]
    if len(listed) > LISTED:
        listed[LISTED:] = [f"... {len(listed) - LISTED} more (see db list --all)"]
    raise UsageError(f"{problem}: {', '.join(listed) or 'none, the database is empty'}", stage="db")


def _prefix_width(summaries: list[WorkloadSummary]) -> int:
    """The shortest hash prefix (at least HASH_SHOWN) that tells every stored workload apart,
    so that each prefix shown selects exactly one."""
    hashes = {s.hash for s in summaries}
    width = HASH_SHOWN
    while len({h[:width] for h in hashes}) < len(hashes):
        width += 1
    return width


def _labels(workloads: list[dict[str, Any]], *, full: bool = True) -> list[str]:
    """Labels that tell `workloads` apart: each one's name and options (`full`), or only the
    options in which they differ; where that leaves two alike, the identity fields (op kind,
    dtypes, shapes, payload hash) in which those differ are added."""
    options = [
        _facets({k: v for k, v in w.get("options", {}).items() if k != "name"}) for w in workloads
    ]
    keys = _differing(options) if not full else list(dict.fromkeys(k for o in options for k in o))
    labels = [
        " ".join([str(w.get("name", "?")), *(o[k] for k in keys if k in o)])
        for w, o in zip(workloads, options, strict=True)
    ]
    for label_ in set(labels):
        alike = [i for i, other in enumerate(labels) if other == label_]
        if len(alike) < 2:
            continue
        identity = [_facets({k: workloads[i].get(k) for k in IDENTITY}) for i in alike]
        extra = _differing(identity)
        for i, facets in zip(alike, identity, strict=True):
            labels[i] = " ".join([labels[i], *(facets[k] for k in extra)])
    return labels


def _facets(values: dict[str, Any]) -> dict[str, str]:
    """KEY=VALUE texts of the values given; lists and nested values as compact JSON."""
    return {
        key: f"{key}={value if isinstance(value, str | int | float) else _compact(value)}"
        for key, value in values.items()
        if value is not None
    }


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _differing(facets: list[dict[str, str]]) -> list[str]:
    """The keys, in first-seen order, whose texts are not the same in all `facets`."""
    keys = dict.fromkeys(key for each in facets for key in each)
    return [key for key in keys if len({each.get(key) for each in facets}) > 1]


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
