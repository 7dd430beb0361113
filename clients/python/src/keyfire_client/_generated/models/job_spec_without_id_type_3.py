from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="JobSpecWithoutIdType3")


@_attrs_define
class JobSpecWithoutIdType3:
    """
    Attributes:
        after (str):
        at (None | Unset):
        cron (None | Unset):
        every (None | Unset):
        exclude (list[str] | Unset):
        jitter (None | Unset):
        tz (None | Unset):
    """

    after: str
    at: None | Unset = UNSET
    cron: None | Unset = UNSET
    every: None | Unset = UNSET
    exclude: list[str] | Unset = UNSET
    jitter: None | Unset = UNSET
    tz: None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        after = self.after

        at = self.at

        cron = self.cron

        every = self.every

        exclude: list[str] | Unset = UNSET
        if not isinstance(self.exclude, Unset):
            exclude = self.exclude

        jitter = self.jitter

        tz = self.tz

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "after": after,
            }
        )
        if at is not UNSET:
            field_dict["at"] = at
        if cron is not UNSET:
            field_dict["cron"] = cron
        if every is not UNSET:
            field_dict["every"] = every
        if exclude is not UNSET:
            field_dict["exclude"] = exclude
        if jitter is not UNSET:
            field_dict["jitter"] = jitter
        if tz is not UNSET:
            field_dict["tz"] = tz

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        after = d.pop("after")

        at = d.pop("at", UNSET)

        cron = d.pop("cron", UNSET)

        every = d.pop("every", UNSET)

        exclude = cast(list[str], d.pop("exclude", UNSET))

        jitter = d.pop("jitter", UNSET)

        tz = d.pop("tz", UNSET)

        job_spec_without_id_type_3 = cls(
            after=after,
            at=at,
            cron=cron,
            every=every,
            exclude=exclude,
            jitter=jitter,
            tz=tz,
        )

        job_spec_without_id_type_3.additional_properties = d
        return job_spec_without_id_type_3

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
