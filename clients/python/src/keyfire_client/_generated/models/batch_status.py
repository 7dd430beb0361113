from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="BatchStatus")


@_attrs_define
class BatchStatus:
    """A batch as Redis keeps it (`{tag}:batch:<id>`).

    Attributes:
        cancelled (int): Tasks cancelled or deleted before they ended.
        created_ms (int): When it was created (ms).
        died (int): Tasks that went to their dead letters.
        id (str): The batch's id.
        pending (int): Tasks not ended yet.
        succeeded (int): Tasks that succeeded.
        total (int): Tasks in the batch.
        completed_ms (int | None | Unset): When its last task ended and its callback was queued (ms); none while tasks
            are pending.
    """

    cancelled: int
    created_ms: int
    died: int
    id: str
    pending: int
    succeeded: int
    total: int
    completed_ms: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cancelled = self.cancelled

        created_ms = self.created_ms

        died = self.died

        id = self.id

        pending = self.pending

        succeeded = self.succeeded

        total = self.total

        completed_ms: int | None | Unset
        if isinstance(self.completed_ms, Unset):
            completed_ms = UNSET
        else:
            completed_ms = self.completed_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cancelled": cancelled,
                "created_ms": created_ms,
                "died": died,
                "id": id,
                "pending": pending,
                "succeeded": succeeded,
                "total": total,
            }
        )
        if completed_ms is not UNSET:
            field_dict["completed_ms"] = completed_ms

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        cancelled = d.pop("cancelled")

        created_ms = d.pop("created_ms")

        died = d.pop("died")

        id = d.pop("id")

        pending = d.pop("pending")

        succeeded = d.pop("succeeded")

        total = d.pop("total")

        def _parse_completed_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        completed_ms = _parse_completed_ms(d.pop("completed_ms", UNSET))

        batch_status = cls(
            cancelled=cancelled,
            created_ms=created_ms,
            died=died,
            id=id,
            pending=pending,
            succeeded=succeeded,
            total=total,
            completed_ms=completed_ms,
        )

        batch_status.additional_properties = d
        return batch_status

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
