from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="TopicPaused")


@_attrs_define
class TopicPaused:
    """A topic's paused state after a pause or resume.

    Attributes:
        changed (bool): Whether this call changed it (false: it was so already).
        paused (bool): Whether it is paused now.
        topic (str): The topic.
    """

    changed: bool
    paused: bool
    topic: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        changed = self.changed

        paused = self.paused

        topic = self.topic

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "changed": changed,
                "paused": paused,
                "topic": topic,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        changed = d.pop("changed")

        paused = d.pop("paused")

        topic = d.pop("topic")

        topic_paused = cls(
            changed=changed,
            paused=paused,
            topic=topic,
        )

        topic_paused.additional_properties = d
        return topic_paused

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
