"""What a scan did, counted: the totals the scan task logs and records for the status page."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ScanResult:
    claimed: int = 0
    delivered: int = 0
    retried: int = 0
    failed: int = 0
    skipped: int = 0
    released: int = 0
    lost_lease: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def add(self, other: ScanResult) -> None:
        for name in ("claimed", "delivered", "retried", "failed", "skipped", "released", "lost_lease"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for kind, n in other.errors.items():
            self.errors[kind] = self.errors.get(kind, 0) + n
