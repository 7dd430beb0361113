from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="TopicCounts")


@_attrs_define
class TopicCounts:
    """A topic's tasks by state, and its counters since it was first used: see [`Queue::topics`](crate::Queue::topics).

    Attributes:
        added (int): Tasks added, in all.
        dead (int): Dead letters (within the dead-letter retention).
        delayed (int): Tasks waiting for their instant.
        deleted (int): Tasks deleted while delayed, ready or reserved, in all (a dead letter deleted or purged,
            or a finished task's record deleted, is not counted again).
        delivered (int): Pops that returned a task, in all.
        done (int): Tasks finished, in all.
        ready (int): Tasks waiting for a consumer.
        redelivered (int): Reservations that expired and went back to ready, in all.
        reserved (int): Tasks held by consumers.
        topic (str): The topic.
        partitions (int | Unset): Its number of partitions (1 unless declared with more).
        paused (bool | Unset): Paused: pops reserve none of its tasks until it is resumed (adds go on).
        replayed (int | Unset): Dead letters replayed (made ready again), in all.
    """

    added: int
    dead: int
    delayed: int
    deleted: int
    delivered: int
    done: int
    ready: int
    redelivered: int
    reserved: int
    topic: str
    partitions: int | Unset = UNSET
    paused: bool | Unset = UNSET
    replayed: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        added = self.added

        dead = self.dead

        delayed = self.delayed

        deleted = self.deleted

        delivered = self.delivered

        done = self.done

        ready = self.ready

        redelivered = self.redelivered

        reserved = self.reserved

        topic = self.topic

        partitions = self.partitions

        paused = self.paused

        replayed = self.replayed

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "added": added,
                "dead": dead,
                "delayed": delayed,
                "deleted": deleted,
                "delivered": delivered,
                "done": done,
                "ready": ready,
                "redelivered": redelivered,
                "reserved": reserved,
                "topic": topic,
            }
        )
        if partitions is not UNSET:
            field_dict["partitions"] = partitions
        if paused is not UNSET:
            field_dict["paused"] = paused
        if replayed is not UNSET:
            field_dict["replayed"] = replayed

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        added = d.pop("added")

        dead = d.pop("dead")

        delayed = d.pop("delayed")

        deleted = d.pop("deleted")

        delivered = d.pop("delivered")

        done = d.pop("done")

        ready = d.pop("ready")

        redelivered = d.pop("redelivered")

        reserved = d.pop("reserved")

        topic = d.pop("topic")

        partitions = d.pop("partitions", UNSET)

        paused = d.pop("paused", UNSET)

        replayed = d.pop("replayed", UNSET)

        topic_counts = cls(
            added=added,
            dead=dead,
            delayed=delayed,
            deleted=deleted,
            delivered=delivered,
            done=done,
            ready=ready,
            redelivered=redelivered,
            reserved=reserved,
            topic=topic,
            partitions=partitions,
            paused=paused,
            replayed=replayed,
        )

        topic_counts.additional_properties = d
        return topic_counts

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
