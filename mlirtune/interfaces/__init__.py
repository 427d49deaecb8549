"""The bottom floor: interfaces and plain value types that every other layer builds on.

Modules here import nothing from mlirtune outside this package, so any layer may use them
without pulling another in: errors, dtype, op (OpInfo), workload (Workload, ArgSpec,
Complexity), runtime, verification, bench (BenchOptions, BenchResult), lowering (Stage,
Descriptor, Lowering), target, engine and schedule (ScheduleFamily, Knob, Constraint).
"""
