from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Added")


@_attrs_define
class Added:
    """An added task.

    Attributes:
        id (str): The task's id: with `dedup`, that of the task the key names when this was a duplicate.
        topic (str): Its topic.
        deduplicated (None | str | Unset): Only for a duplicate (`dedup`): what it did to the task the key names:
            `kept`,
            `replaced`, `extended` or `replaced_extended`. Example: replaced.
    """

    id: str
    topic: str
    deduplicated: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        topic = self.topic

        deduplicated: None | str | Unset
        if isinstance(self.deduplicated, Unset):
            deduplicated = UNSET
        else:
            deduplicated = self.deduplicated

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "topic": topic,
            }
        )
        if deduplicated is not UNSET:
            field_dict["deduplicated"] = deduplicated

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = d.pop("id")

        topic = d.pop("topic")

        def _parse_deduplicated(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        deduplicated = _parse_deduplicated(d.pop("deduplicated", UNSET))

        added = cls(
            id=id,
            topic=topic,
            deduplicated=deduplicated,
        )

        added.additional_properties = d
        return added

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
