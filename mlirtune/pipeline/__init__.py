"""Descriptor-driven lowering: YAML pipelines of passes and parameterised schedules."""

from mlirtune.pipeline.descriptor import DescriptorError, load_descriptor
from mlirtune.pipeline.driver import apply_schedule, resolve_values, run_pipeline
from mlirtune.pipeline.lookup import (
    find_descriptor,
    list_descriptors,
    resolve_descriptor,
    with_schedule_file,
)

__all__ = [
    "DescriptorError",
    "apply_schedule",
    "find_descriptor",
    "list_descriptors",
    "load_descriptor",
    "resolve_descriptor",
    "resolve_values",
    "run_pipeline",
    "with_schedule_file",
]
