from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="TaskView")


@_attrs_define
class TaskView:
    """A task as stored. Instants are Redis time.

    Attributes:
        created_at (datetime.datetime): When it was added.
        deliveries (int): Deliveries so far.
        due_at (datetime.datetime): When it is (was) due.
        id (str): The task's id.
        max_deliveries (int): Deliveries before the dead letters.
        payload (Any): Its payload: any JSON value, as it was added (null once done or deleted).
        priority (int): Its priority, 0 to 9 (higher first).
        state (str): `delayed`, `ready`, `reserved`, `done`, `dead` or `deleted`. Example: ready.
        topic (str): Its topic.
        ttr (str): Time-to-run of a reservation. Example: 60s.
        batch_id (None | str | Unset): The batch it was added in (`POST /v1/topics/{topic}/tasks/batch` with
            `on_complete`);
            absent for other tasks.
        deadline (datetime.datetime | None | Unset): The deadline of its reservation, while reserved.
        finished_at (datetime.datetime | None | Unset): When it was finished, went to the dead letters, or was deleted.
        ready_at (datetime.datetime | None | Unset): When it last became ready.
        reserved_at (datetime.datetime | None | Unset): When it was last reserved.
    """

    created_at: datetime.datetime
    deliveries: int
    due_at: datetime.datetime
    id: str
    max_deliveries: int
    payload: Any
    priority: int
    state: str
    topic: str
    ttr: str
    batch_id: None | str | Unset = UNSET
    deadline: datetime.datetime | None | Unset = UNSET
    finished_at: datetime.datetime | None | Unset = UNSET
    ready_at: datetime.datetime | None | Unset = UNSET
    reserved_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        deliveries = self.deliveries

        due_at = self.due_at.isoformat()

        id = self.id

        max_deliveries = self.max_deliveries

        payload = self.payload

        priority = self.priority

        state = self.state

        topic = self.topic

        ttr = self.ttr

        batch_id: None | str | Unset
        if isinstance(self.batch_id, Unset):
            batch_id = UNSET
        else:
            batch_id = self.batch_id

        deadline: None | str | Unset
        if isinstance(self.deadline, Unset):
            deadline = UNSET
        elif isinstance(self.deadline, datetime.datetime):
            deadline = self.deadline.isoformat()
        else:
            deadline = self.deadline

        finished_at: None | str | Unset
        if isinstance(self.finished_at, Unset):
            finished_at = UNSET
        elif isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        ready_at: None | str | Unset
        if isinstance(self.ready_at, Unset):
            ready_at = UNSET
        elif isinstance(self.ready_at, datetime.datetime):
            ready_at = self.ready_at.isoformat()
        else:
            ready_at = self.ready_at

        reserved_at: None | str | Unset
        if isinstance(self.reserved_at, Unset):
            reserved_at = UNSET
        elif isinstance(self.reserved_at, datetime.datetime):
            reserved_at = self.reserved_at.isoformat()
        else:
            reserved_at = self.reserved_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "deliveries": deliveries,
                "due_at": due_at,
                "id": id,
                "max_deliveries": max_deliveries,
                "payload": payload,
                "priority": priority,
                "state": state,
                "topic": topic,
                "ttr": ttr,
            }
        )
        if batch_id is not UNSET:
            field_dict["batch_id"] = batch_id
        if deadline is not UNSET:
            field_dict["deadline"] = deadline
        if finished_at is not UNSET:
            field_dict["finished_at"] = finished_at
        if ready_at is not UNSET:
            field_dict["ready_at"] = ready_at
        if reserved_at is not UNSET:
            field_dict["reserved_at"] = reserved_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        deliveries = d.pop("deliveries")

        due_at = datetime.datetime.fromisoformat(d.pop("due_at"))

        id = d.pop("id")

        max_deliveries = d.pop("max_deliveries")

        payload = d.pop("payload")

        priority = d.pop("priority")

        state = d.pop("state")

        topic = d.pop("topic")

        ttr = d.pop("ttr")

        def _parse_batch_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        batch_id = _parse_batch_id(d.pop("batch_id", UNSET))

        def _parse_deadline(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                deadline_type_0 = datetime.datetime.fromisoformat(data)

                return deadline_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        deadline = _parse_deadline(d.pop("deadline", UNSET))

        def _parse_finished_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                finished_at_type_0 = datetime.datetime.fromisoformat(data)

                return finished_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        finished_at = _parse_finished_at(d.pop("finished_at", UNSET))

        def _parse_ready_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                ready_at_type_0 = datetime.datetime.fromisoformat(data)

                return ready_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        ready_at = _parse_ready_at(d.pop("ready_at", UNSET))

        def _parse_reserved_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                reserved_at_type_0 = datetime.datetime.fromisoformat(data)

                return reserved_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        reserved_at = _parse_reserved_at(d.pop("reserved_at", UNSET))

        task_view = cls(
            created_at=created_at,
            deliveries=deliveries,
            due_at=due_at,
            id=id,
            max_deliveries=max_deliveries,
            payload=payload,
            priority=priority,
            state=state,
            topic=topic,
            ttr=ttr,
            batch_id=batch_id,
            deadline=deadline,
            finished_at=finished_at,
            ready_at=ready_at,
            reserved_at=reserved_at,
        )

        task_view.additional_properties = d
        return task_view

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
