from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="TopicDeadLetter")


@_attrs_define
class TopicDeadLetter:
    """One dead letter of a topic. Instants are Redis time.

    Attributes:
        created_at (datetime.datetime): When it was added.
        deliveries (int): Deliveries it was given (its `max_deliveries`, unless that was lowered).
        due_at (datetime.datetime): When it was due.
        id (str): The task's id.
        max_deliveries (int): Deliveries it was allowed.
        payload (Any): Its payload, as it was added.
        topic (str): Its topic.
        died_at (datetime.datetime | None | Unset): When it became a dead letter.
        error (None | str | Unset): Why it died: which delivery's reservation expired unfinished (null for dead letters
            of earlier releases).
    """

    created_at: datetime.datetime
    deliveries: int
    due_at: datetime.datetime
    id: str
    max_deliveries: int
    payload: Any
    topic: str
    died_at: datetime.datetime | None | Unset = UNSET
    error: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        deliveries = self.deliveries

        due_at = self.due_at.isoformat()

        id = self.id

        max_deliveries = self.max_deliveries

        payload = self.payload

        topic = self.topic

        died_at: None | str | Unset
        if isinstance(self.died_at, Unset):
            died_at = UNSET
        elif isinstance(self.died_at, datetime.datetime):
            died_at = self.died_at.isoformat()
        else:
            died_at = self.died_at

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

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
                "topic": topic,
            }
        )
        if died_at is not UNSET:
            field_dict["died_at"] = died_at
        if error is not UNSET:
            field_dict["error"] = error

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

        topic = d.pop("topic")

        def _parse_died_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                died_at_type_0 = datetime.datetime.fromisoformat(data)

                return died_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        died_at = _parse_died_at(d.pop("died_at", UNSET))

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        topic_dead_letter = cls(
            created_at=created_at,
            deliveries=deliveries,
            due_at=due_at,
            id=id,
            max_deliveries=max_deliveries,
            payload=payload,
            topic=topic,
            died_at=died_at,
            error=error,
        )

        topic_dead_letter.additional_properties = d
        return topic_dead_letter

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
