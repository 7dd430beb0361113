from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="DateRange")


@_attrs_define
class DateRange:
    """A range of whole days, both ends included.

    Attributes:
        from_ (str): The first day (`YYYY-MM-DD`). Example: 2026-12-24.
        to (str): The last day (`YYYY-MM-DD`), not before `from`. Example: 2026-12-31.
    """

    from_: str
    to: str

    def to_dict(self) -> dict[str, Any]:
        from_ = self.from_

        to = self.to

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "from": from_,
                "to": to,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        from_ = d.pop("from")

        to = d.pop("to")

        date_range = cls(
            from_=from_,
            to=to,
        )

        return date_range
