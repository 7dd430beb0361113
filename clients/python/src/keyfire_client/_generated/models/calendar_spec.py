from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.date_range import DateRange


T = TypeVar("T", bound="CalendarSpec")


@_attrs_define
class CalendarSpec:
    """A calendar as a user declares it (REST, TOML, CLI, Rust) and as keyfire stores it.

    Attributes:
        cron (list[str] | Unset): Cron expressions (5 fields, 6 with seconds): an instant they match, in the calendar's
            zone, is excluded (`* * 2-3 * * SUN`: every instant of 02:00-03:59 on Sundays). Example: ['* * 2-3 * * SUN'].
        dates (list[str] | Unset): Whole days excluded, as `YYYY-MM-DD` in the calendar's zone. Example: ['2026-12-25',
            '2026-12-26'].
        name (str | Unset): Its name, as jobs give it in `exclude`: `[A-Za-z0-9][A-Za-z0-9_.-]*`, at most 128
            bytes. In `PUT /v1/calendars/{name}` it may be left out (the path gives it). Example: de-holidays.
        ranges (list[DateRange] | Unset): Ranges of whole days excluded, both ends included.
        tz (None | str | Unset): IANA zone its dates and expressions are read in (default `UTC`). Example:
            Europe/Berlin.
    """

    cron: list[str] | Unset = UNSET
    dates: list[str] | Unset = UNSET
    name: str | Unset = UNSET
    ranges: list[DateRange] | Unset = UNSET
    tz: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        cron: list[str] | Unset = UNSET
        if not isinstance(self.cron, Unset):
            cron = self.cron

        dates: list[str] | Unset = UNSET
        if not isinstance(self.dates, Unset):
            dates = self.dates

        name = self.name

        ranges: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.ranges, Unset):
            ranges = []
            for ranges_item_data in self.ranges:
                ranges_item = ranges_item_data.to_dict()
                ranges.append(ranges_item)

        tz: None | str | Unset
        if isinstance(self.tz, Unset):
            tz = UNSET
        else:
            tz = self.tz

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if cron is not UNSET:
            field_dict["cron"] = cron
        if dates is not UNSET:
            field_dict["dates"] = dates
        if name is not UNSET:
            field_dict["name"] = name
        if ranges is not UNSET:
            field_dict["ranges"] = ranges
        if tz is not UNSET:
            field_dict["tz"] = tz

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.date_range import DateRange  # noqa: PLC0415

        d = dict(src_dict)
        cron = cast(list[str], d.pop("cron", UNSET))

        dates = cast(list[str], d.pop("dates", UNSET))

        name = d.pop("name", UNSET)

        _ranges = d.pop("ranges", UNSET)
        ranges: list[DateRange] | Unset = UNSET
        if _ranges is not UNSET:
            ranges = []
            for ranges_item_data in _ranges:
                ranges_item = DateRange.from_dict(ranges_item_data)

                ranges.append(ranges_item)

        def _parse_tz(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        tz = _parse_tz(d.pop("tz", UNSET))

        calendar_spec = cls(
            cron=cron,
            dates=dates,
            name=name,
            ranges=ranges,
            tz=tz,
        )

        return calendar_spec
