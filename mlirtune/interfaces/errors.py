"""Error types that carry where a problem happened, so the CLI can print one clear line."""

from __future__ import annotations


class MlirtuneError(Exception):
    """A user-facing failure: `stage` names the step (parse, schedule, lower, jit, ...)."""

    exit_code = 2

    def __init__(self, message: str, *, stage: str | None = None) -> None:
        super().__init__(message)
        self.stage = stage

    def __str__(self) -> str:
        text = super().__str__()
        return f"[{self.stage}] {text}" if self.stage else text


class UsageError(MlirtuneError):
    """Bad input from the user: unknown names, malformed values, missing files."""


class VerificationError(MlirtuneError):
    """The kernel ran but its output disagrees with the reference."""

    exit_code = 1


class BaselineFailed(MlirtuneError):
    """A tuning run's starting point, the config its pipeline chooses, fails to compile or
    to verify: nothing can be measured against it."""
