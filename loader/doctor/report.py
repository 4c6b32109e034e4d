"""What ``loader doctor`` found: one ``Check`` per line, and the report's verdict.

Example::

    report = DoctorReport([Check("alias", "ok", "chunks -> chunks-v1")])
    report.lines()   # ['ok    alias: chunks -> chunks-v1']
    report.check()   # raises the first failure's error class (its exit code), else nothing
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loader.errors import IncompatibleIndexError, LoaderError

STATUSES = ("ok", "warn", "fail", "skip")
_LABELS = {"ok": "ok", "warn": "warn", "fail": "FAIL", "skip": "skip"}


@dataclass
class Check:
    """One check's result. ``error`` is the error class a failure maps to (its exit code)."""

    name: str
    status: str
    detail: str
    fix: str = ""
    error: type[LoaderError] = IncompatibleIndexError

    def __post_init__(self) -> None:
        assert self.status in STATUSES, self.status

    def line(self) -> str:
        """``FAIL  search pipeline chunks-rrf: missing; fix: run `loader apply```."""
        text = f"{_LABELS[self.status]:<5} {self.name}: {self.detail}"
        return f"{text}; fix: {self.fix}" if self.fix else text

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "fix": self.fix,
            "exit_code": self.error.exit_code if self.status == "fail" else 0,
        }


@dataclass
class DoctorReport:
    """Every check, in order."""

    checks: list[Check] = field(default_factory=list)

    @property
    def failures(self) -> list[Check]:
        return [check for check in self.checks if check.status == "fail"]

    def lines(self) -> list[str]:
        return [check.line() for check in self.checks]

    def summary(self) -> str:
        counts = {status: 0 for status in STATUSES}
        for check in self.checks:
            counts[check.status] += 1
        return (
            f"{counts['ok']} ok, {counts['warn']} warnings, {counts['fail']} failed, "
            f"{counts['skip']} skipped"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "checks": [check.to_dict() for check in self.checks],
            "summary": self.summary(),
            "healthy": not self.failures,
        }

    def check(self) -> None:
        """Raise the first failure's error class (exit code 3 for the cluster, 5 for an index
        that does not fit the files ...) with the summary; nothing when no check failed."""
        if self.failures:
            first = self.failures[0]
            raise first.error(f"loader doctor: {self.summary()}; first: {first.name}")
