from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="TopicView")


@_attrs_define
class TopicView:
    """A topic's settings as stored.

    Attributes:
        partitions (int): Its number of partitions.
        topic (str): The topic.
        paused (bool | Unset): Paused: its pops reserve nothing (`POST /v1/topics/{topic}/pause`, `/resume`).
    """

    partitions: int
    topic: str
    paused: bool | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        partitions = self.partitions

        topic = self.topic

        paused = self.paused

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "partitions": partitions,
                "topic": topic,
            }
        )
        if paused is not UNSET:
            field_dict["paused"] = paused

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        partitions = d.pop("partitions")

        topic = d.pop("topic")

        paused = d.pop("paused", UNSET)

        topic_view = cls(
            partitions=partitions,
            topic=topic,
            paused=paused,
        )

        topic_view.additional_properties = d
        return topic_view

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
