from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="WhyLimit")


@_attrs_define
class WhyLimit:
    """A flow limit that holds the job's firings back.

    Attributes:
        key (str): The limit key.
        running (int): Firings running under it now.
        waiting (int): Firings waiting in line.
        in_flight (int | None | Unset): Most firings running at once, if bounded.
        rate (int | None | Unset): Most firings started per second, if bounded.
    """

    key: str
    running: int
    waiting: int
    in_flight: int | None | Unset = UNSET
    rate: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        key = self.key

        running = self.running

        waiting = self.waiting

        in_flight: int | None | Unset
        if isinstance(self.in_flight, Unset):
            in_flight = UNSET
        else:
            in_flight = self.in_flight

        rate: int | None | Unset
        if isinstance(self.rate, Unset):
            rate = UNSET
        else:
            rate = self.rate

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "key": key,
                "running": running,
                "waiting": waiting,
            }
        )
        if in_flight is not UNSET:
            field_dict["in_flight"] = in_flight
        if rate is not UNSET:
            field_dict["rate"] = rate

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        key = d.pop("key")

        running = d.pop("running")

        waiting = d.pop("waiting")

        def _parse_in_flight(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        in_flight = _parse_in_flight(d.pop("in_flight", UNSET))

        def _parse_rate(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        rate = _parse_rate(d.pop("rate", UNSET))

        why_limit = cls(
            key=key,
            running=running,
            waiting=waiting,
            in_flight=in_flight,
            rate=rate,
        )

        why_limit.additional_properties = d
        return why_limit

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
