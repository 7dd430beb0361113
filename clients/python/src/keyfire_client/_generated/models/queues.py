from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Queues")


@_attrs_define
class Queues:
    """Sizes of the scheduling sets.

    Attributes:
        due (int): Jobs whose next firing is due now or overdue (not claimed yet).
        retrying (int): Firings queued for another attempt (retries, takeovers, triggers, replays).
        running (int): Runs in progress (holding a lease).
    """

    due: int
    retrying: int
    running: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        due = self.due

        retrying = self.retrying

        running = self.running

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "due": due,
                "retrying": retrying,
                "running": running,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        due = d.pop("due")

        retrying = d.pop("retrying")

        running = d.pop("running")

        queues = cls(
            due=due,
            retrying=retrying,
            running=running,
        )

        queues.additional_properties = d
        return queues

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
