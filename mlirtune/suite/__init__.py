"""Benchmark suites: YAML lists of workloads (definition.py), their runs into a results file
(runner.py, results.py), run-to-run verdicts (compare.py) and an HTML report (report.py)."""
