from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="JobCounts")


@_attrs_define
class JobCounts:
    """Jobs by status.

    Attributes:
        active (int): Active jobs among those read.
        complete (bool): Whether every job was read (`scanned == total`).
        finished (int): Finished jobs among those read.
        paused (int): Paused jobs among those read.
        scanned (int): Jobs read for the counts and totals (at most 10,000, in listing order).
        total (int): Every job under the prefix.
        waiting (int): Tasks waiting for the task their `after_task` names, among those read.
    """

    active: int
    complete: bool
    finished: int
    paused: int
    scanned: int
    total: int
    waiting: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        active = self.active

        complete = self.complete

        finished = self.finished

        paused = self.paused

        scanned = self.scanned

        total = self.total

        waiting = self.waiting

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "active": active,
                "complete": complete,
                "finished": finished,
                "paused": paused,
                "scanned": scanned,
                "total": total,
                "waiting": waiting,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        active = d.pop("active")

        complete = d.pop("complete")

        finished = d.pop("finished")

        paused = d.pop("paused")

        scanned = d.pop("scanned")

        total = d.pop("total")

        waiting = d.pop("waiting")

        job_counts = cls(
            active=active,
            complete=complete,
            finished=finished,
            paused=paused,
            scanned=scanned,
            total=total,
            waiting=waiting,
        )

        job_counts.additional_properties = d
        return job_counts

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
