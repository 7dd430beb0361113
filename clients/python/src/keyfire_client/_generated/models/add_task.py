from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.dedup_spec import DedupSpec


T = TypeVar("T", bound="AddTask")


@_attrs_define
class AddTask:
    """A task to add to a topic.

    Attributes:
        at (datetime.datetime | None | Unset): Ready at this instant (RFC 3339).
        dedup (DedupSpec | None | Unset):
        delay (None | str | Unset): Ready after this delay (`30s`, `5m`); at once when neither `delay` nor `at` is
            given. Example: 30s.
        id (None | str | Unset): Its id (idempotent add: an id that exists is left as it is); a fresh one when absent.
        max_deliveries (int | None | Unset): Deliveries before it goes to the topic's dead letters (default 5).
        payload (Any | Unset): Any JSON value (an object, an array, a string, a number, …), handed to the consumer
            as it is (at most `limits.max_params_bytes` serialized).
        priority (int | None | Unset): Its priority, 0 (default, lowest) to 9: pops take the highest ready first, in the
            order they became ready within a level (strict: a lower level waits while a higher one
            has ready tasks). Example: 5.
        ttr (None | str | Unset): How long a consumer may hold it before it is handed to another (default `60s`).
            Example: 60s.
    """

    at: datetime.datetime | None | Unset = UNSET
    dedup: DedupSpec | None | Unset = UNSET
    delay: None | str | Unset = UNSET
    id: None | str | Unset = UNSET
    max_deliveries: int | None | Unset = UNSET
    payload: Any | Unset = UNSET
    priority: int | None | Unset = UNSET
    ttr: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.dedup_spec import DedupSpec  # noqa: PLC0415

        at: None | str | Unset
        if isinstance(self.at, Unset):
            at = UNSET
        elif isinstance(self.at, datetime.datetime):
            at = self.at.isoformat()
        else:
            at = self.at

        dedup: dict[str, Any] | None | Unset
        if isinstance(self.dedup, Unset):
            dedup = UNSET
        elif isinstance(self.dedup, DedupSpec):
            dedup = self.dedup.to_dict()
        else:
            dedup = self.dedup

        delay: None | str | Unset
        if isinstance(self.delay, Unset):
            delay = UNSET
        else:
            delay = self.delay

        id: None | str | Unset
        if isinstance(self.id, Unset):
            id = UNSET
        else:
            id = self.id

        max_deliveries: int | None | Unset
        if isinstance(self.max_deliveries, Unset):
            max_deliveries = UNSET
        else:
            max_deliveries = self.max_deliveries

        payload = self.payload

        priority: int | None | Unset
        if isinstance(self.priority, Unset):
            priority = UNSET
        else:
            priority = self.priority

        ttr: None | str | Unset
        if isinstance(self.ttr, Unset):
            ttr = UNSET
        else:
            ttr = self.ttr

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if at is not UNSET:
            field_dict["at"] = at
        if dedup is not UNSET:
            field_dict["dedup"] = dedup
        if delay is not UNSET:
            field_dict["delay"] = delay
        if id is not UNSET:
            field_dict["id"] = id
        if max_deliveries is not UNSET:
            field_dict["max_deliveries"] = max_deliveries
        if payload is not UNSET:
            field_dict["payload"] = payload
        if priority is not UNSET:
            field_dict["priority"] = priority
        if ttr is not UNSET:
            field_dict["ttr"] = ttr

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.dedup_spec import DedupSpec  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                at_type_0 = datetime.datetime.fromisoformat(data)

                return at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        at = _parse_at(d.pop("at", UNSET))

        def _parse_dedup(data: object) -> DedupSpec | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                dedup_type_0 = DedupSpec.from_dict(data)

                return dedup_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(DedupSpec | None | Unset, data)

        dedup = _parse_dedup(d.pop("dedup", UNSET))

        def _parse_delay(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        delay = _parse_delay(d.pop("delay", UNSET))

        def _parse_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        id = _parse_id(d.pop("id", UNSET))

        def _parse_max_deliveries(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_deliveries = _parse_max_deliveries(d.pop("max_deliveries", UNSET))

        payload = d.pop("payload", UNSET)

        def _parse_priority(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        priority = _parse_priority(d.pop("priority", UNSET))

        def _parse_ttr(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        ttr = _parse_ttr(d.pop("ttr", UNSET))

        add_task = cls(
            at=at,
            dedup=dedup,
            delay=delay,
            id=id,
            max_deliveries=max_deliveries,
            payload=payload,
            priority=priority,
            ttr=ttr,
        )

        return add_task
