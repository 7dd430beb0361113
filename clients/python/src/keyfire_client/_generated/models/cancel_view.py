from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="CancelView")


@_attrs_define
class CancelView:
    """What a cancel did.

    Attributes:
        cancelled (list[str]): Firings cancelled before they ran, recorded `cancelled` in the job's runs already: a
            one-shot job's pending instant (the job is then `finished`), attempts queued for a
            retry.
        job_id (str): The job.
        stopping (list[str]): Running firings told to stop: the node running each stops it and records it
            `cancelled` in the job's runs (unless it succeeded first). Empty with status 200.
    """

    cancelled: list[str]
    job_id: str
    stopping: list[str]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cancelled = self.cancelled

        job_id = self.job_id

        stopping = self.stopping

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cancelled": cancelled,
                "job_id": job_id,
                "stopping": stopping,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        cancelled = cast(list[str], d.pop("cancelled"))

        job_id = d.pop("job_id")

        stopping = cast(list[str], d.pop("stopping"))

        cancel_view = cls(
            cancelled=cancelled,
            job_id=job_id,
            stopping=stopping,
        )

        cancel_view.additional_properties = d
        return cancel_view

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
