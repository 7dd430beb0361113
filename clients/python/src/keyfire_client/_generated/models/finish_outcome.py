from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="FinishOutcome")


@_attrs_define
class FinishOutcome:
    """How a batch finish answered one task.

    Attributes:
        id (str): The task's id.
        outcome (str): `done` (also when done already under this token), `lost` (the reservation is no
            longer this token's: the task went back to ready, to another consumer or to the dead
            letters), `not_found` (no such task, or deleted). Example: done.
    """

    id: str
    outcome: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        outcome = self.outcome

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "outcome": outcome,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = d.pop("id")

        outcome = d.pop("outcome")

        finish_outcome = cls(
            id=id,
            outcome=outcome,
        )

        finish_outcome.additional_properties = d
        return finish_outcome

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
