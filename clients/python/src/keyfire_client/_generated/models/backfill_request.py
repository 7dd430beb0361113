from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="BackfillRequest")


@_attrs_define
class BackfillRequest:
    """The range to backfill, and how fast.

    Attributes:
        from_ (datetime.datetime): The first instant of the range (included). Example: 2026-03-01T00:00:00Z.
        to (datetime.datetime): The last instant of the range (included); not in the future. The range may hold at
            most 10,000 instants of the schedule. Example: 2026-03-02T00:00:00Z.
        rate (float | None | Unset): Runs per second, from 0.01 to 100 (default 10); a job's backfills run one after the
            other at their rates. Example: 10.0.
    """

    from_: datetime.datetime
    to: datetime.datetime
    rate: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from_ = self.from_.isoformat()

        to = self.to.isoformat()

        rate: float | None | Unset
        if isinstance(self.rate, Unset):
            rate = UNSET
        else:
            rate = self.rate

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "from": from_,
                "to": to,
            }
        )
        if rate is not UNSET:
            field_dict["rate"] = rate

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        from_ = datetime.datetime.fromisoformat(d.pop("from"))

        to = datetime.datetime.fromisoformat(d.pop("to"))

        def _parse_rate(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        rate = _parse_rate(d.pop("rate", UNSET))

        backfill_request = cls(
            from_=from_,
            to=to,
            rate=rate,
        )

        return backfill_request
