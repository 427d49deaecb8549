"""`suite report`: one self-contained HTML page about a suite run.

The page holds the run's manifest, a table of every entry against its baselines and the
measured peak, charts (throughput, roofline, sample spread) and, when asked, the comparison
with a baseline run and a tuning database's history. Charts are embedded PNGs and nothing is
loaded from elsewhere, so the file can be archived or attached to a CI job as it is.
"""

from __future__ import annotations

import html
import json
import shlex
import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mlirtune.interfaces.errors import UsageError
from mlirtune.suite import charts
from mlirtune.suite.compare import DEFAULT_THRESHOLD, compare_results
from mlirtune.suite.results import OK, WRONG, EntryResult, Manifest, SuiteResults
from mlirtune.toolchain import digest

if TYPE_CHECKING:
    from mlirtune.tune.db_records import Record

NONE = "—"
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
pre { white-space: pre-wrap; margin: 0.3em 0; font-size: 0.85em; }
img { max-width: 100%; }
.ok, .improved, .faster { color: #1a7f37; }
.failed, .wrong, .regressed, .slower { color: #b42318; font-weight: bold; }
.empty { color: #777; font-style: italic; }
"""


def write_report(
    results: SuiteResults,
    output: Path,
    baseline: SuiteResults | None = None,
    tuning_db: Path | None = None,
) -> None:
    """Write the HTML report of `results` to `output`, with the comparison against
    `baseline` and the tuning history in `tuning_db` when given. The database is read
    first, so a bad path is a UsageError before anything is written."""
    db_path = Path(tuning_db) if tuning_db is not None else None
    records = _read_tuning_db(db_path) if db_path is not None else None
    sections = [_manifest_section(results.manifest), _entries_section(results)]
    sections += _chart_sections(results)
    if baseline is not None:
        sections.append(_comparison_section(baseline, results))
    if db_path is not None and records is not None:
        sections.append(_tuning_section(db_path, records))
    title = f"mlirtune suite report: {results.manifest.suite}"
    page = (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_esc(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(sections)
        + "\n</body>\n</html>\n"
    )
    try:
        Path(output).write_text(page, encoding="utf-8")
    except OSError as error:
        raise UsageError(
            f"cannot write report {output}: {error.strerror or error}", stage="report"
        ) from None


# --- HTML pieces ---------------------------------------------------------------------------


def _esc(value: object) -> str:
    return html.escape(str(value))


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], css: str) -> str:
    """A table: `headers` are plain text (escaped here; none: no header row), row cells are
    HTML already."""
    head = "".join(f"<th>{_esc(header)}</th>" for header in headers)
    body = "\n".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{css}">\n' + (f"<tr>{head}</tr>\n" if head else "") + f"{body}\n</table>"


def _section(id_: str, title: str, *parts: str) -> str:
    return f'<section id="{id_}">\n<h2>{_esc(title)}</h2>\n' + "\n".join(parts) + "\n</section>"


def _figure(png: str | None, caption: str, empty: str) -> str:
    """An embedded PNG chart with its caption, or a line saying why there is none."""
    if png is None:
        return f'<p class="empty">{_esc(empty)}</p>'
    return (
        f'<figure><img alt="{_esc(caption)}" src="data:image/png;base64,{png}">'
        f"<figcaption>{_esc(caption)}</figcaption></figure>"
    )


def _num(value: float | None, spec: str = ".4g") -> str:
    return NONE if value is None else _esc(format(value, spec))


def _time(seconds: float | None, *interval: float) -> str:
    """A duration in s, ms or µs (whichever reads best), with an interval in the same unit."""
    if seconds is None:
        return NONE
    unit, scale = next(
        (u, f) for u, f in (("s", 1), ("ms", 1e3), ("µs", 1e6)) if seconds * f >= 1 or u == "µs"
    )
    text = f"{seconds * scale:.4g} {unit}"
    if interval:
        text += " [" + ", ".join(f"{x * scale:.4g}" for x in interval) + "]"
    return _esc(text)


def _details(summary: str, text: str) -> str:
    """A collapsed block (no script needed) holding long text such as an error."""
    return f"<details><summary>{summary}</summary><pre>{_esc(text)}</pre></details>"


def _bytes(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size / (1 << shift):.4g} {unit}"
    return f"{size} B"


# --- sections ------------------------------------------------------------------------------


def _manifest_section(manifest: Manifest) -> str:
    """The header: what ran, where, with what, and when."""
    target = manifest.target
    summary = [str(target[key]) for key in ("model", "arch", "isa") if target.get(key)]
    for name, key in (("L1d", "l1d_bytes"), ("L2", "l2_bytes"), ("L3", "l3_bytes")):
        size = target.get(key)
        if isinstance(size, int) and size > 0:
            summary.append(f"{name} {_bytes(size)}")
    summary.append(f"fingerprint {digest(target)}")
    fingerprint = json.dumps(target, indent=1, sort_keys=True)
    toolchain = ", ".join(f"{name} {version}" for name, version in manifest.toolchain.items())
    peak = manifest.peak_gflops
    rows = [
        ("suite", _esc(manifest.suite)),
        ("mlirtune version", _esc(manifest.mlirtune_version)),
        ("git commit", _esc(manifest.git_commit or "unknown")),
        ("target", _details(_esc(" · ".join(summary)), fingerprint)),
        ("toolchain", _esc(toolchain or NONE)),
        ("threads", _esc(manifest.threads)),
        (
            "peak GFLOP/s (one core)",
            _esc(f"{peak:.4g} (× {manifest.threads} = {peak * manifest.threads:.4g})"),
        ),
        *(
            (f"{dtype} peak GFLOP/s (one core)", _num(value))
            for dtype, value in sorted(manifest.dtype_peaks_gflops.items())
        ),
        ("bandwidth GB/s (one core)", _num(manifest.bandwidth_gbs)),
        ("started", _esc(manifest.started)),
        ("finished", _esc(manifest.finished or "not finished (interrupted run?)")),
        ("command", f"<code>{_esc(shlex.join(manifest.command))}</code>"),
    ]
    table = _table([], ([f"<b>{_esc(k)}</b>", v] for k, v in rows), "manifest")
    return f'<header id="manifest">\n<h1>{_esc(f"Suite {manifest.suite}")}</h1>\n{table}\n</header>'


def _entries_section(results: SuiteResults) -> str:
    """One row per entry: our throughput, each baseline's and our speed ratio against it,
    the share of the measured peak, and the verification (or the error)."""
    entries = list(results.entries.values())
    names = sorted({name for entry in entries for name in entry.baselines})
    headers = ["entry", "status", "threads", "ours GFLOP/s", "ours median (95% CI)"]
    for name in names:
        headers += [f"{name} GFLOP/s", f"speedup vs {name}"]
    headers += ["% of peak", "verification"]
    manifest = results.manifest
    rows = [_entry_row(entry, names, manifest.peak_for(entry.workload)) for entry in entries]
    note = (
        "Speedup vs a baseline is its median time over ours (above 1: ours is faster). "
        "% of peak is against the measured one-core peak of the entry's element type "
        "times the entry's threads."
    )
    if any(entry.dispatch_times for entry in entries):
        headers.append("slowest dispatch (share of the dispatches' time)")
        for entry, row in zip(entries, rows, strict=True):
            row.append(_dispatch_times_cell(entry))
        note += (
            " A dispatch's share is of the sum of the distinct dispatches' times, each timed "
            "alone on the values it reads in the model, times its calls."
        )
    table = _table(headers, rows, "entries") if rows else '<p class="empty">no entries</p>'
    return _section("entries", "Entries", table, f"<p>{_esc(note)}</p>")


def _entry_row(entry: EntryResult, baselines: list[str], peak_gflops: float) -> list[str]:
    ours = entry.ours
    status = f'<span class="{_esc(entry.status)}">{_esc(entry.status)}</span>'
    cells = [_esc(entry.name), status, _esc(entry.threads), _num(ours.gflops if ours else None)]
    cells.append(_time(ours.median_s, ours.ci_low_s, ours.ci_high_s) if ours else NONE)
    for name in baselines:
        other = entry.baselines.get(name)
        cells.append(_num(other.gflops if other else None))
        if other is None or ours is None or ours.median_s <= 0:
            cells.append(NONE)
        else:
            ratio = other.median_s / ours.median_s
            css = "faster" if ratio >= 1 else "slower"
            cells.append(f'<span class="{css}">{_esc(f"{ratio:.3g}×")}</span>')
    peak = peak_gflops * entry.threads
    percent = 100 * ours.gflops / peak if ours and ours.gflops and peak > 0 else None
    cells.append(_num(percent, ".1f"))
    if entry.status == OK:
        cells.append('<span class="ok">verified</span>')
    else:
        what = "wrong result" if entry.status == WRONG else "failed"
        error = entry.error or f"status {entry.status}"
        first = error.strip().splitlines()[0] if error.strip() else what
        cells.append(_details(f'<span class="failed">{_esc(what)}</span>: {_esc(first)}', error))
    return cells


def _dispatch_times_cell(entry: EntryResult) -> str:
    """The slowest dispatch and its share; every distinct dispatch in a collapsed list."""
    times = entry.dispatch_times
    if not times:
        return NONE
    totals = [float(t["calls"]) * float(t["median_s"]) for t in times]
    whole = sum(totals) or 1.0
    lines = [
        f"{100 * total / whole:5.1f}%  {t['calls']} x {_time(float(t['median_s']))}  "
        f"{t['function']}  {t['roots']}" + ("" if t["scheduled"] else "  (untuned)")
        for t, total in zip(times, totals, strict=True)
    ]
    first = times[0]
    summary = f"{100 * totals[0] / whole:.0f}% {first['roots']}"
    return _details(_esc(summary), "\n".join(lines))


def _chart_sections(results: SuiteResults) -> list[str]:
    """Throughput bars, the roofline and the sample distributions."""
    roofline = (
        "Achieved GFLOP/s against FLOP per byte moved. The solid roof is one core's measured "
        "peak and bandwidth; dashed lines are the peak times each thread count used (the "
        "bandwidth of several cores is not measured)."
    )
    throughput = "Median GFLOP/s of ours and of each baseline, per ok entry."
    spread = "Every sample of ours divided by the entry's median (the median is under the name)."
    no_throughput = "no ok entry with a throughput to plot"
    return [
        _section(
            "throughput",
            "Throughput",
            _figure(charts.throughput_chart(results), throughput, no_throughput),
        ),
        _section(
            "roofline",
            "Roofline",
            _figure(
                charts.roofline_chart(results),
                roofline,
                "no ok entry with FLOP and byte counts to plot",
            ),
        ),
        _section(
            "samples",
            "Sample distributions",
            _figure(charts.samples_chart(results), spread, "no samples to plot"),
        ),
    ]


def _comparison_section(baseline: SuiteResults, results: SuiteResults) -> str:
    """`suite compare` of the baseline run (BASE) against this one (NEW): table and chart."""
    comparisons = compare_results(baseline, results)
    counts = Counter(c.verdict for c in comparisons)
    summary = ", ".join(f"{count} {verdict}" for verdict, count in sorted(counts.items()))
    base = baseline.manifest
    against = f"BASE: {base.suite}, commit {base.git_commit or 'unknown'}, started {base.started}"
    rows = [
        [
            _esc(c.name),
            f'<span class="{_esc(c.verdict)}">{_esc(c.verdict)}</span>',
            _num(c.ratio, ".3f"),
            NONE if c.ci_low is None else _esc(f"[{c.ci_low:.3f}, {c.ci_high:.3f}]"),
            _time(c.base_median_s),
            _time(c.new_median_s),
            _esc(c.note),
        ]
        for c in comparisons
    ]
    headers = ["entry", "verdict", "ratio", "95% CI", "BASE median", "NEW median", "note"]
    chart = _figure(
        charts.ratio_chart(comparisons, DEFAULT_THRESHOLD),
        "Speed ratio BASE / NEW (relative to numpy where the note says so) with 95% "
        "bootstrap intervals; the grey band is "
        f"±{DEFAULT_THRESHOLD:.0%}, within which an entry counts as unchanged.",
        "no entry measured in both runs",
    )
    return _section(
        "comparison",
        "Comparison with a baseline run",
        f"<p>{_esc(against)}. {_esc(summary)}.</p>",
        _table(headers, rows, "comparison"),
        chart,
    )


# --- tuning database -----------------------------------------------------------------------


def _read_tuning_db(path: Path) -> list[Record]:
    """Every record of the tuning database at `path`, oldest first, read-only; a missing or
    unreadable file is a UsageError naming it."""
    from mlirtune.tune.db import TuningDB  # only reports with a database load the tuner

    try:
        with TuningDB(path, readonly=True) as db:
            return db.records()
    except (sqlite3.Error, ValueError) as error:
        raise UsageError(f"cannot read tuning database {path}: {error}", stage="report") from None


def _problem_label(record: Record) -> str:
    workload = record.workload
    shapes = workload.get("shapes") or []
    shape_text = ", ".join("x".join(str(n) for n in shape) for shape in shapes)
    model = record.target.get("model", record.target_hash)
    return (
        f"{workload.get('name', record.workload_hash)} {shape_text} [{record.pipeline}] on {model}"
    )


def _problems(records: list[Record]) -> dict[str, list[Record]]:
    """Records grouped per tuning problem (workload, target, toolchain, pipeline)."""
    groups: dict[tuple[str, str, str, str], list[Record]] = {}
    for r in records:
        key = (r.workload_hash, r.target_hash, r.toolchain_hash, r.pipeline_hash)
        groups.setdefault(key, []).append(r)
    labelled: dict[str, list[Record]] = {}
    for group in groups.values():
        label = base = _problem_label(group[0])
        copy = 1
        while label in labelled:  # the same problem on another toolchain or CPU fingerprint
            copy += 1
            label = f"{base} #{copy}"
        labelled[label] = group
    return labelled


def _tuning_section(path: Path, records: list[Record]) -> str:
    """Best-so-far per tuning problem (chart and table) and the failures by status."""
    curves: list[charts.TuningCurve] = []
    rows: list[list[str]] = []
    for label, group in _problems(records).items():
        candidates = [r for r in group if r.role == "candidate"]
        ok = [(i, r) for i, r in enumerate(candidates, 1) if r.status == OK and r.median_s]
        curve = charts.best_so_far(
            label, [r.gflops if r.status == OK else None for r in candidates]
        )
        if curve is not None:
            curves.append(curve)
        row = [_esc(label), _esc(len(candidates)), _esc(len(ok))]
        if ok:  # the fastest ok candidate: lowest median time, as TuningDB.best picks it
            index, best = min(ok, key=lambda pair: (pair[1].median_s or 0.0, pair[0]))
            row += [_num(best.gflops), _time(best.median_s), _esc(index)]
        else:
            row += [NONE, NONE, NONE]
        rows.append(row)
    failures = Counter(r.status for r in records if r.status != OK)
    examples = {r.status: r.detail for r in records if r.status != OK and r.detail}  # latest
    failure_rows = [
        [_esc(status), _esc(count), _esc(examples.get(status, "").strip()[:300] or NONE)]
        for status, count in failures.most_common()
    ]
    headers = ["problem", "candidates", "ok", "best GFLOP/s", "best median", "at evaluation"]
    chart = _figure(
        charts.tuning_chart(curves),
        f"Best GFLOP/s so far per tuning problem (at most {charts.MAX_CURVES} shown).",
        "no ok candidate with a throughput to plot",
    )
    failure_table = (
        _table(["status", "records", "example detail"], failure_rows, "failures")
        if failure_rows
        else '<p class="empty">no failed evaluations</p>'
    )
    return _section(
        "tuning",
        "Tuning database",
        f"<p>{_esc(path)}: {len(records)} records.</p>",
        _table(headers, rows, "tuning") if rows else '<p class="empty">no records</p>',
        chart,
        f"<h3>Failures by status</h3>\n{failure_table}",
    )
