from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Totals")


@_attrs_define
class Totals:
    """Cumulative counters of the jobs read (jobs deleted since take theirs with them).

    Attributes:
        dead (int): Firings that ended in the dead letters (including ones replayed or purged since).
        failures (int): Runs that failed.
        missed (int): Firings skipped under the misfire policy.
        runs (int): Runs started (attempts claimed; a run in progress counts).
        skipped (int): Firings skipped because the previous run still ran (overlap `forbid`).
        triggered (int): Manual triggers.
    """

    dead: int
    failures: int
    missed: int
    runs: int
    skipped: int
    triggered: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dead = self.dead

        failures = self.failures

        missed = self.missed

        runs = self.runs

        skipped = self.skipped

        triggered = self.triggered

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dead": dead,
                "failures": failures,
                "missed": missed,
                "runs": runs,
                "skipped": skipped,
                "triggered": triggered,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        dead = d.pop("dead")

        failures = d.pop("failures")

        missed = d.pop("missed")

        runs = d.pop("runs")

        skipped = d.pop("skipped")

        triggered = d.pop("triggered")

        totals = cls(
            dead=dead,
            failures=failures,
            missed=missed,
            runs=runs,
            skipped=skipped,
            triggered=triggered,
        )

        totals.additional_properties = d
        return totals

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
