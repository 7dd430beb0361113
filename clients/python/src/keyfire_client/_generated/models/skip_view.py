from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.skip_reason_code import SkipReasonCode
from ..types import UNSET, Unset

T = TypeVar("T", bound="SkipView")


@_attrs_define
class SkipView:
    """An instant, or a range of instants, that was due and did not run.

    Attributes:
        count (int): How many instants (a long outage's range is one record).
        reason (SkipReasonCode): Why an instant did not run.
        detail (None | str | Unset): More: the firing id of the run that still ran (`overlap`).
        first_at (datetime.datetime | None | Unset): The first instant dropped.
        last_at (datetime.datetime | None | Unset): The last instant dropped (`first_at` for one).
        recorded_at (datetime.datetime | None | Unset): When it was recorded (Redis time).
    """

    count: int
    reason: SkipReasonCode
    detail: None | str | Unset = UNSET
    first_at: datetime.datetime | None | Unset = UNSET
    last_at: datetime.datetime | None | Unset = UNSET
    recorded_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        count = self.count

        reason = self.reason.value

        detail: None | str | Unset
        if isinstance(self.detail, Unset):
            detail = UNSET
        else:
            detail = self.detail

        first_at: None | str | Unset
        if isinstance(self.first_at, Unset):
            first_at = UNSET
        elif isinstance(self.first_at, datetime.datetime):
            first_at = self.first_at.isoformat()
        else:
            first_at = self.first_at

        last_at: None | str | Unset
        if isinstance(self.last_at, Unset):
            last_at = UNSET
        elif isinstance(self.last_at, datetime.datetime):
            last_at = self.last_at.isoformat()
        else:
            last_at = self.last_at

        recorded_at: None | str | Unset
        if isinstance(self.recorded_at, Unset):
            recorded_at = UNSET
        elif isinstance(self.recorded_at, datetime.datetime):
            recorded_at = self.recorded_at.isoformat()
        else:
            recorded_at = self.recorded_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "count": count,
                "reason": reason,
            }
        )
        if detail is not UNSET:
            field_dict["detail"] = detail
        if first_at is not UNSET:
            field_dict["first_at"] = first_at
        if last_at is not UNSET:
            field_dict["last_at"] = last_at
        if recorded_at is not UNSET:
            field_dict["recorded_at"] = recorded_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        count = d.pop("count")

        reason = SkipReasonCode(d.pop("reason"))

        def _parse_detail(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        detail = _parse_detail(d.pop("detail", UNSET))

        def _parse_first_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                first_at_type_0 = datetime.datetime.fromisoformat(data)

                return first_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        first_at = _parse_first_at(d.pop("first_at", UNSET))

        def _parse_last_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_at_type_0 = datetime.datetime.fromisoformat(data)

                return last_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        last_at = _parse_last_at(d.pop("last_at", UNSET))

        def _parse_recorded_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                recorded_at_type_0 = datetime.datetime.fromisoformat(data)

                return recorded_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        recorded_at = _parse_recorded_at(d.pop("recorded_at", UNSET))

        skip_view = cls(
            count=count,
            reason=reason,
            detail=detail,
            first_at=first_at,
            last_at=last_at,
            recorded_at=recorded_at,
        )

        skip_view.additional_properties = d
        return skip_view

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
