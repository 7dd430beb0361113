from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="BackfillView")


@_attrs_define
class BackfillView:
    """What a backfill queued.

    Attributes:
        instants (int): Instants of the schedule in the range.
        job_id (str): The job.
        scheduled (int): Those queued to run, each once, as firing `<job id>:<instant ms>`.
        skipped (int): Those skipped as already run (or running, queued, or still to come on the schedule).
        first_at (datetime.datetime | None | Unset): When the first queued run is due.
        last_at (datetime.datetime | None | Unset): When the last queued run is due.
    """

    instants: int
    job_id: str
    scheduled: int
    skipped: int
    first_at: datetime.datetime | None | Unset = UNSET
    last_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        instants = self.instants

        job_id = self.job_id

        scheduled = self.scheduled

        skipped = self.skipped

        first_at: None | str | Unset
        if isinstance(self.first_at, Unset):
            first_at = UNSET
        elif isinstance(self.first_at, datetime.datetime):
            first_at = self.first_at.isoformat()
        else:
            first_at = self.first_at

        last_at: None | str | Unset
        if isinstance(self.last_at, Unset):
            last_at = UNSET
        elif isinstance(self.last_at, datetime.datetime):
            last_at = self.last_at.isoformat()
        else:
            last_at = self.last_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "instants": instants,
                "job_id": job_id,
                "scheduled": scheduled,
                "skipped": skipped,
            }
        )
        if first_at is not UNSET:
            field_dict["first_at"] = first_at
        if last_at is not UNSET:
            field_dict["last_at"] = last_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        instants = d.pop("instants")

        job_id = d.pop("job_id")

        scheduled = d.pop("scheduled")

        skipped = d.pop("skipped")

        def _parse_first_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                first_at_type_0 = datetime.datetime.fromisoformat(data)

                return first_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        first_at = _parse_first_at(d.pop("first_at", UNSET))

        def _parse_last_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_at_type_0 = datetime.datetime.fromisoformat(data)

                return last_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        last_at = _parse_last_at(d.pop("last_at", UNSET))

        backfill_view = cls(
            instants=instants,
            job_id=job_id,
            scheduled=scheduled,
            skipped=skipped,
            first_at=first_at,
            last_at=last_at,
        )

        backfill_view.additional_properties = d
        return backfill_view

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
