from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.why_code import WhyCode
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.timeline_entry import TimelineEntry
    from ..models.why_cause import WhyCause
    from ..models.why_limit import WhyLimit
    from ..models.why_retry import WhyRetry
    from ..models.why_running import WhyRunning


T = TypeVar("T", bound="WhyView")


@_attrs_define
class WhyView:
    """Why a job runs, or does not, now.

    Attributes:
        causes (list[WhyCause]): Every reason that applies, the main one first.
        handler (str): Its handler.
        handler_nodes (list[str]): The live nodes that register its handler.
        id (str): The job's id.
        recent (list[TimelineEntry]): Its last runs and skips (five of each at most), newest first.
        state (WhyCode): A reason a job runs, or does not, now.
        status (str): `active`, `paused`, `finished`, or `waiting` (a task waiting for its `after_task`).
        summary (str): In one sentence.
        flow_limit (None | Unset | WhyLimit):
        next_at (datetime.datetime | None | Unset): Its next firing, if any.
        next_in_ms (int | None | Unset): How far off the next firing is, in ms (negative: overdue).
        now (datetime.datetime | None | Unset): Redis's clock now.
        paused_since (datetime.datetime | None | Unset): When it was paused, if it is.
        retry (None | Unset | WhyRetry):
        running (None | Unset | WhyRunning):
    """

    causes: list[WhyCause]
    handler: str
    handler_nodes: list[str]
    id: str
    recent: list[TimelineEntry]
    state: WhyCode
    status: str
    summary: str
    flow_limit: None | Unset | WhyLimit = UNSET
    next_at: datetime.datetime | None | Unset = UNSET
    next_in_ms: int | None | Unset = UNSET
    now: datetime.datetime | None | Unset = UNSET
    paused_since: datetime.datetime | None | Unset = UNSET
    retry: None | Unset | WhyRetry = UNSET
    running: None | Unset | WhyRunning = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.why_limit import WhyLimit  # noqa: PLC0415
        from ..models.why_retry import WhyRetry  # noqa: PLC0415
        from ..models.why_running import WhyRunning  # noqa: PLC0415

        causes = []
        for causes_item_data in self.causes:
            causes_item = causes_item_data.to_dict()
            causes.append(causes_item)

        handler = self.handler

        handler_nodes = self.handler_nodes

        id = self.id

        recent = []
        for recent_item_data in self.recent:
            recent_item = recent_item_data.to_dict()
            recent.append(recent_item)

        state = self.state.value

        status = self.status

        summary = self.summary

        flow_limit: dict[str, Any] | None | Unset
        if isinstance(self.flow_limit, Unset):
            flow_limit = UNSET
        elif isinstance(self.flow_limit, WhyLimit):
            flow_limit = self.flow_limit.to_dict()
        else:
            flow_limit = self.flow_limit

        next_at: None | str | Unset
        if isinstance(self.next_at, Unset):
            next_at = UNSET
        elif isinstance(self.next_at, datetime.datetime):
            next_at = self.next_at.isoformat()
        else:
            next_at = self.next_at

        next_in_ms: int | None | Unset
        if isinstance(self.next_in_ms, Unset):
            next_in_ms = UNSET
        else:
            next_in_ms = self.next_in_ms

        now: None | str | Unset
        if isinstance(self.now, Unset):
            now = UNSET
        elif isinstance(self.now, datetime.datetime):
            now = self.now.isoformat()
        else:
            now = self.now

        paused_since: None | str | Unset
        if isinstance(self.paused_since, Unset):
            paused_since = UNSET
        elif isinstance(self.paused_since, datetime.datetime):
            paused_since = self.paused_since.isoformat()
        else:
            paused_since = self.paused_since

        retry: dict[str, Any] | None | Unset
        if isinstance(self.retry, Unset):
            retry = UNSET
        elif isinstance(self.retry, WhyRetry):
            retry = self.retry.to_dict()
        else:
            retry = self.retry

        running: dict[str, Any] | None | Unset
        if isinstance(self.running, Unset):
            running = UNSET
        elif isinstance(self.running, WhyRunning):
            running = self.running.to_dict()
        else:
            running = self.running

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "causes": causes,
                "handler": handler,
                "handler_nodes": handler_nodes,
                "id": id,
                "recent": recent,
                "state": state,
                "status": status,
                "summary": summary,
            }
        )
        if flow_limit is not UNSET:
            field_dict["flow_limit"] = flow_limit
        if next_at is not UNSET:
            field_dict["next_at"] = next_at
        if next_in_ms is not UNSET:
            field_dict["next_in_ms"] = next_in_ms
        if now is not UNSET:
            field_dict["now"] = now
        if paused_since is not UNSET:
            field_dict["paused_since"] = paused_since
        if retry is not UNSET:
            field_dict["retry"] = retry
        if running is not UNSET:
            field_dict["running"] = running

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.timeline_entry import TimelineEntry  # noqa: PLC0415
        from ..models.why_cause import WhyCause  # noqa: PLC0415
        from ..models.why_limit import WhyLimit  # noqa: PLC0415
        from ..models.why_retry import WhyRetry  # noqa: PLC0415
        from ..models.why_running import WhyRunning  # noqa: PLC0415

        d = dict(src_dict)
        causes = []
        _causes = d.pop("causes")
        for causes_item_data in _causes:
            causes_item = WhyCause.from_dict(causes_item_data)

            causes.append(causes_item)

        handler = d.pop("handler")

        handler_nodes = cast(list[str], d.pop("handler_nodes"))

        id = d.pop("id")

        recent = []
        _recent = d.pop("recent")
        for recent_item_data in _recent:
            recent_item = TimelineEntry.from_dict(recent_item_data)

            recent.append(recent_item)

        state = WhyCode(d.pop("state"))

        status = d.pop("status")

        summary = d.pop("summary")

        def _parse_flow_limit(data: object) -> None | Unset | WhyLimit:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                flow_limit_type_0 = WhyLimit.from_dict(data)

                return flow_limit_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | WhyLimit, data)

        flow_limit = _parse_flow_limit(d.pop("flow_limit", UNSET))

        def _parse_next_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                next_at_type_0 = datetime.datetime.fromisoformat(data)

                return next_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        next_at = _parse_next_at(d.pop("next_at", UNSET))

        def _parse_next_in_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        next_in_ms = _parse_next_in_ms(d.pop("next_in_ms", UNSET))

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

        def _parse_paused_since(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                paused_since_type_0 = datetime.datetime.fromisoformat(data)

                return paused_since_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        paused_since = _parse_paused_since(d.pop("paused_since", UNSET))

        def _parse_retry(data: object) -> None | Unset | WhyRetry:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                retry_type_0 = WhyRetry.from_dict(data)

                return retry_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | WhyRetry, data)

        retry = _parse_retry(d.pop("retry", UNSET))

        def _parse_running(data: object) -> None | Unset | WhyRunning:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                running_type_0 = WhyRunning.from_dict(data)

                return running_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | WhyRunning, data)

        running = _parse_running(d.pop("running", UNSET))

        why_view = cls(
            causes=causes,
            handler=handler,
            handler_nodes=handler_nodes,
            id=id,
            recent=recent,
            state=state,
            status=status,
            summary=summary,
            flow_limit=flow_limit,
            next_at=next_at,
            next_in_ms=next_in_ms,
            now=now,
            paused_since=paused_since,
            retry=retry,
            running=running,
        )

        why_view.additional_properties = d
        return why_view

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
