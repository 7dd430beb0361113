from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="TopicSettings")


@_attrs_define
class TopicSettings:
    """A topic's settings, as `PUT /v1/topics/{topic}` takes them.

    Attributes:
        partitions (int): How many partitions the topic's tasks spread over (1 to 64): each on a shard of its
            own while there are shards enough, so a hot topic's tasks, memory and pops spread over
            the masters of a cluster. Set once, before the topic's first task, never changed.
    """

    partitions: int

    def to_dict(self) -> dict[str, Any]:
        partitions = self.partitions

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "partitions": partitions,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        partitions = d.pop("partitions")

        topic_settings = cls(
            partitions=partitions,
        )

        return topic_settings
