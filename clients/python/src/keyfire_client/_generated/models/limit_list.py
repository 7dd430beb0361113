from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.limit_status import LimitStatus


T = TypeVar("T", bound="LimitList")


@_attrs_define
class LimitList:
    """Every limit.

    Attributes:
        limits (list[LimitStatus]): By key.
    """

    limits: list[LimitStatus]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        limits = []
        for limits_item_data in self.limits:
            limits_item = limits_item_data.to_dict()
            limits.append(limits_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "limits": limits,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.limit_status import LimitStatus  # noqa: PLC0415

        d = dict(src_dict)
        limits = []
        _limits = d.pop("limits")
        for limits_item_data in _limits:
            limits_item = LimitStatus.from_dict(limits_item_data)

            limits.append(limits_item)

        limit_list = cls(
            limits=limits,
        )

        limit_list.additional_properties = d
        return limit_list

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
