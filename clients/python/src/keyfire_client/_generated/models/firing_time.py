from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="FiringTime")


@_attrs_define
class FiringTime:
    """One coming firing, in UTC and in the job's zone.

    Attributes:
        local (str): The same instant in the job's zone (RFC 3339 with its offset). Example: 2026-03-09T09:00:00+01:00.
        utc (str): The instant in UTC (RFC 3339). Example: 2026-03-09T08:00:00Z.
    """

    local: str
    utc: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        local = self.local

        utc = self.utc

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "local": local,
                "utc": utc,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        local = d.pop("local")

        utc = d.pop("utc")

        firing_time = cls(
            local=local,
            utc=utc,
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
