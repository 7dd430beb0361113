from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ReservedView")


@_attrs_define
class ReservedView:
    """A popped task and its reservation. Instants are Redis time.

    Attributes:
        deadline (datetime.datetime): When the reservation expires unless finished or touched.
        deliveries (int): Deliveries so far, this one included.
        due_at (datetime.datetime): When the task was due.
        id (str): The task's id.
        payload (Any): Its payload: any JSON value, as it was added.
        priority (int): Its priority, 0 to 9 (higher first).
        ready_at (datetime.datetime): When it (last) became ready.
        reserved_at (datetime.datetime): When this pop reserved it.
        token (str): The reservation token: `finish` and `touch` need it.
        topic (str): Its topic.
        ttr (str): The time-to-run of this reservation. Example: 60s.
    """

    deadline: datetime.datetime
    deliveries: int
    due_at: datetime.datetime
    id: str
    payload: Any
    priority: int
    ready_at: datetime.datetime
    reserved_at: datetime.datetime
    token: str
    topic: str
    ttr: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        deadline = self.deadline.isoformat()

        deliveries = self.deliveries

        due_at = self.due_at.isoformat()

        id = self.id

        payload = self.payload

        priority = self.priority

        ready_at = self.ready_at.isoformat()

        reserved_at = self.reserved_at.isoformat()

        token = self.token

        topic = self.topic

        ttr = self.ttr

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "deadline": deadline,
                "deliveries": deliveries,
                "due_at": due_at,
                "id": id,
                "payload": payload,
                "priority": priority,
                "ready_at": ready_at,
                "reserved_at": reserved_at,
                "token": token,
                "topic": topic,
                "ttr": ttr,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        deadline = datetime.datetime.fromisoformat(d.pop("deadline"))

        deliveries = d.pop("deliveries")

        due_at = datetime.datetime.fromisoformat(d.pop("due_at"))

        id = d.pop("id")

        payload = d.pop("payload")

        priority = d.pop("priority")

        ready_at = datetime.datetime.fromisoformat(d.pop("ready_at"))

        reserved_at = datetime.datetime.fromisoformat(d.pop("reserved_at"))

        token = d.pop("token")

        topic = d.pop("topic")

        ttr = d.pop("ttr")

        reserved_view = cls(
            deadline=deadline,
            deliveries=deliveries,
            due_at=due_at,
            id=id,
            payload=payload,
            priority=priority,
            ready_at=ready_at,
            reserved_at=reserved_at,
            token=token,
            topic=topic,
            ttr=ttr,
        )

        reserved_view.additional_properties = d
        return reserved_view

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
