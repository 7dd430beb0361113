from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="JobSpecType1")


@_attrs_define
class JobSpecType1:
    """
    Attributes:
        every (str):
        after (None | Unset):
        at (None | Unset):
        cron (None | Unset):
        tz (None | Unset):
    """

    every: str
    after: None | Unset = UNSET
    at: None | Unset = UNSET
    cron: None | Unset = UNSET
    tz: None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        every = self.every

        after = self.after

        at = self.at

        cron = self.cron

        tz = self.tz

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "every": every,
            }
        )
        if after is not UNSET:
            field_dict["after"] = after
        if at is not UNSET:
            field_dict["at"] = at
        if cron is not UNSET:
            field_dict["cron"] = cron
        if tz is not UNSET:
            field_dict["tz"] = tz

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        every = d.pop("every")

        after = d.pop("after", UNSET)

        at = d.pop("at", UNSET)

        cron = d.pop("cron", UNSET)

        tz = d.pop("tz", UNSET)

        job_spec_type_1 = cls(
            every=every,
            after=after,
            at=at,
            cron=cron,
            tz=tz,
        )

        job_spec_type_1.additional_properties = d
        return job_spec_type_1

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
