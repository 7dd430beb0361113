from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.topic_dead_letter import TopicDeadLetter


T = TypeVar("T", bound="TopicDeadList")


@_attrs_define
class TopicDeadList:
    """A topic's dead letters, newest first.

    Attributes:
        dead (list[TopicDeadLetter]): The dead letters.
    """

    dead: list[TopicDeadLetter]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dead = []
        for dead_item_data in self.dead:
            dead_item = dead_item_data.to_dict()
            dead.append(dead_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dead": dead,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.topic_dead_letter import TopicDeadLetter  # noqa: PLC0415

        d = dict(src_dict)
        dead = []
        _dead = d.pop("dead")
        for dead_item_data in _dead:
            dead_item = TopicDeadLetter.from_dict(dead_item_data)

            dead.append(dead_item)

        topic_dead_list = cls(
            dead=dead,
        )

        topic_dead_list.additional_properties = d
        return topic_dead_list

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
