from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="FiringTime")


@_attrs_define
class FiringTime:
    """One coming firing, in UTC and in the job's zone.

    Attributes:
        local (str): The same instant in the job's zone (RFC 3339 with its offset). Example: 2026-03-09T09:00:00+01:00.
        utc (str): The instant in UTC (RFC 3339). Example: 2026-03-09T08:00:00Z.
        fires_at (None | str | Unset): Only for a job with `jitter`: when it fires, its instant plus its offset (UTC).
            The
            instant above stays its firing id. Example: 2026-03-09T08:00:17.342Z.
    """

    local: str
    utc: str
    fires_at: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        local = self.local

        utc = self.utc

        fires_at: None | str | Unset
        if isinstance(self.fires_at, Unset):
            fires_at = UNSET
        else:
            fires_at = self.fires_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "local": local,
                "utc": utc,
            }
        )
        if fires_at is not UNSET:
            field_dict["fires_at"] = fires_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        local = d.pop("local")

        utc = d.pop("utc")

        def _parse_fires_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        fires_at = _parse_fires_at(d.pop("fires_at", UNSET))

        firing_time = cls(
            local=local,
            utc=utc,
            fires_at=fires_at,
        )

        firing_time.additional_properties = d
        return firing_time

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
