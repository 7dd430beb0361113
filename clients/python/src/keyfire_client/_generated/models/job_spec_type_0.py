from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="JobSpecType0")


@_attrs_define
class JobSpecType0:
    """
    Attributes:
        cron (str):
        after (None | Unset):
        at (None | Unset):
        every (None | Unset):
    """

    cron: str
    after: None | Unset = UNSET
    at: None | Unset = UNSET
    every: None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cron = self.cron

        after = self.after

        at = self.at

        every = self.every

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cron": cron,
            }
        )
        if after is not UNSET:
            field_dict["after"] = after
        if at is not UNSET:
            field_dict["at"] = at
        if every is not UNSET:
            field_dict["every"] = every

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        cron = d.pop("cron")

        after = d.pop("after", UNSET)

        at = d.pop("at", UNSET)

        every = d.pop("every", UNSET)

        job_spec_type_0 = cls(
            cron=cron,
            after=after,
            at=at,
            every=every,
        )

        job_spec_type_0.additional_properties = d
        return job_spec_type_0

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
