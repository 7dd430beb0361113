from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="LimitSpec")


@_attrs_define
class LimitSpec:
    """A limit shared by the whole cluster: at most `rate` firings of the key start in any one
    second, and at most `in_flight` run at once. At least one of the two is given; neither
    may be 0. A firing held back by its limit is delayed (same attempt, not a failure), in
    the order of its scheduled instant.

        Attributes:
            burst (int | None | Unset): With `rate`: most firings started at once before the pacing applies (default a tenth
                of `rate`, at least 1; at most `rate`). Example: 100.
            in_flight (int | None | Unset): Most firings running at once. Example: 50.
            rate (int | None | Unset): Most firings started per second (a sliding window of one second), paced: `burst`
                at once, then one every 1/rate of a second. Example: 1000.
    """

    burst: int | None | Unset = UNSET
    in_flight: int | None | Unset = UNSET
    rate: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
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

        field_dict.update({})
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

        limit_spec = cls(
            burst=burst,
            in_flight=in_flight,
            rate=rate,
        )

        return limit_spec
