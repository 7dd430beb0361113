from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="LimitStatus")


@_attrs_define
class LimitStatus:
    """A limit key's limit and what is happening under it now.

    Attributes:
        held (int): Firings held back by this limit, waiting in line.
        key (str): The limit key.
        running (int): Firings running now under this key.
        started_last_second (int): Firings started within the last second.
        burst (int | None | Unset): Most firings started at once before the pacing applies, if set (default a tenth of
            `rate`).
        in_flight (int | None | Unset): Most firings running at once, if bounded.
        rate (int | None | Unset): Most firings started per second, if bounded.
    """

    held: int
    key: str
    running: int
    started_last_second: int
    burst: int | None | Unset = UNSET
    in_flight: int | None | Unset = UNSET
    rate: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        held = self.held

        key = self.key

        running = self.running

        started_last_second = self.started_last_second

        burst: int | None | Unset
        if isinstance(self.burst, Unset):
            burst = UNSET
        else:
            burst = self.burst

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
                "held": held,
                "key": key,
                "running": running,
                "started_last_second": started_last_second,
            }
        )
        if burst is not UNSET:
            field_dict["burst"] = burst
        if in_flight is not UNSET:
            field_dict["in_flight"] = in_flight
        if rate is not UNSET:
            field_dict["rate"] = rate

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        held = d.pop("held")

        key = d.pop("key")

        running = d.pop("running")

        started_last_second = d.pop("started_last_second")

        def _parse_burst(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        burst = _parse_burst(d.pop("burst", UNSET))

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

        limit_status = cls(
            held=held,
            key=key,
            running=running,
            started_last_second=started_last_second,
            burst=burst,
            in_flight=in_flight,
            rate=rate,
        )

        limit_status.additional_properties = d
        return limit_status

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
