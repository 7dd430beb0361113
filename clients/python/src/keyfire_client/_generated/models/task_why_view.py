from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.task_why_code import TaskWhyCode
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.task_why_cause import TaskWhyCause


T = TypeVar("T", bound="TaskWhyView")


@_attrs_define
class TaskWhyView:
    """Why a delay-queue task is where it is.

    Attributes:
        causes (list[TaskWhyCause]): Every reason that applies, the main one first.
        deliveries (int): Deliveries so far.
        due_at (datetime.datetime): When it is (was) due.
        due_in_ms (int): How far off its due instant is, in ms (negative: past).
        id (str): The task's id.
        max_deliveries (int): Deliveries before the dead letters.
        paused (bool): Whether its topic is paused.
        state (TaskWhyCode): A reason a task is where it is.
        summary (str): In one sentence.
        task_state (str): `delayed`, `ready`, `reserved`, `dead`, `done` or `deleted`.
        topic (str): The task's topic.
        deadline (datetime.datetime | None | Unset): While reserved: when the reservation expires unless finished or
            touched.
        error (None | str | Unset): A dead letter's: why it went to the dead letters.
        finished_at (datetime.datetime | None | Unset): When it was finished, went to the dead letters, or was deleted.
        now (datetime.datetime | None | Unset): Redis's clock now.
        ready_ahead (int | None | Unset): While ready: how many ready tasks of its topic come before it (in its
            partition, those
            ahead of it; in the others, those of a higher priority or ready earlier).
        ready_at (datetime.datetime | None | Unset): When it last became ready.
    """

    causes: list[TaskWhyCause]
    deliveries: int
    due_at: datetime.datetime
    due_in_ms: int
    id: str
    max_deliveries: int
    paused: bool
    state: TaskWhyCode
    summary: str
    task_state: str
    topic: str
    deadline: datetime.datetime | None | Unset = UNSET
    error: None | str | Unset = UNSET
    finished_at: datetime.datetime | None | Unset = UNSET
    now: datetime.datetime | None | Unset = UNSET
    ready_ahead: int | None | Unset = UNSET
    ready_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        causes = []
        for causes_item_data in self.causes:
            causes_item = causes_item_data.to_dict()
            causes.append(causes_item)

        deliveries = self.deliveries

        due_at = self.due_at.isoformat()

        due_in_ms = self.due_in_ms

        id = self.id

        max_deliveries = self.max_deliveries

        paused = self.paused

        state = self.state.value

        summary = self.summary

        task_state = self.task_state

        topic = self.topic

        deadline: None | str | Unset
        if isinstance(self.deadline, Unset):
            deadline = UNSET
        elif isinstance(self.deadline, datetime.datetime):
            deadline = self.deadline.isoformat()
        else:
            deadline = self.deadline

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        finished_at: None | str | Unset
        if isinstance(self.finished_at, Unset):
            finished_at = UNSET
        elif isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        now: None | str | Unset
        if isinstance(self.now, Unset):
            now = UNSET
        elif isinstance(self.now, datetime.datetime):
            now = self.now.isoformat()
        else:
            now = self.now

        ready_ahead: int | None | Unset
        if isinstance(self.ready_ahead, Unset):
            ready_ahead = UNSET
        else:
            ready_ahead = self.ready_ahead

        ready_at: None | str | Unset
        if isinstance(self.ready_at, Unset):
            ready_at = UNSET
        elif isinstance(self.ready_at, datetime.datetime):
            ready_at = self.ready_at.isoformat()
        else:
            ready_at = self.ready_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "causes": causes,
                "deliveries": deliveries,
                "due_at": due_at,
                "due_in_ms": due_in_ms,
                "id": id,
                "max_deliveries": max_deliveries,
                "paused": paused,
                "state": state,
                "summary": summary,
                "task_state": task_state,
                "topic": topic,
            }
        )
        if deadline is not UNSET:
            field_dict["deadline"] = deadline
        if error is not UNSET:
            field_dict["error"] = error
        if finished_at is not UNSET:
            field_dict["finished_at"] = finished_at
        if now is not UNSET:
            field_dict["now"] = now
        if ready_ahead is not UNSET:
            field_dict["ready_ahead"] = ready_ahead
        if ready_at is not UNSET:
            field_dict["ready_at"] = ready_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.task_why_cause import TaskWhyCause  # noqa: PLC0415

        d = dict(src_dict)
        causes = []
        _causes = d.pop("causes")
        for causes_item_data in _causes:
            causes_item = TaskWhyCause.from_dict(causes_item_data)

            causes.append(causes_item)

        deliveries = d.pop("deliveries")

        due_at = datetime.datetime.fromisoformat(d.pop("due_at"))

        due_in_ms = d.pop("due_in_ms")

        id = d.pop("id")

        max_deliveries = d.pop("max_deliveries")

        paused = d.pop("paused")

        state = TaskWhyCode(d.pop("state"))

        summary = d.pop("summary")

        task_state = d.pop("task_state")

        topic = d.pop("topic")

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

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

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

        def _parse_now(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                now_type_0 = datetime.datetime.fromisoformat(data)

                return now_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        now = _parse_now(d.pop("now", UNSET))

        def _parse_ready_ahead(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        ready_ahead = _parse_ready_ahead(d.pop("ready_ahead", UNSET))

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

        task_why_view = cls(
            causes=causes,
            deliveries=deliveries,
            due_at=due_at,
            due_in_ms=due_in_ms,
            id=id,
            max_deliveries=max_deliveries,
            paused=paused,
            state=state,
            summary=summary,
            task_state=task_state,
            topic=topic,
            deadline=deadline,
            error=error,
            finished_at=finished_at,
            now=now,
            ready_ahead=ready_ahead,
            ready_at=ready_at,
        )

        task_why_view.additional_properties = d
        return task_why_view

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
