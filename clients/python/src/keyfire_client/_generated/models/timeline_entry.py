from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.entry_kind import EntryKind
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.run_view import RunView
    from ..models.skip_view import SkipView


T = TypeVar("T", bound="TimelineEntry")


@_attrs_define
class TimelineEntry:
    """One entry of a job's timeline: a run, or instants that did not run.

    Attributes:
        kind (EntryKind): What a timeline entry is.
        at (datetime.datetime | None | Unset): The instant it is about: a run's scheduled instant, the last instant
            skipped.
        run (None | RunView | Unset):
        skipped (None | SkipView | Unset):
    """

    kind: EntryKind
    at: datetime.datetime | None | Unset = UNSET
    run: None | RunView | Unset = UNSET
    skipped: None | SkipView | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.run_view import RunView  # noqa: PLC0415
        from ..models.skip_view import SkipView  # noqa: PLC0415

        kind = self.kind.value

        at: None | str | Unset
        if isinstance(self.at, Unset):
            at = UNSET
        elif isinstance(self.at, datetime.datetime):
            at = self.at.isoformat()
        else:
            at = self.at

        run: dict[str, Any] | None | Unset
        if isinstance(self.run, Unset):
            run = UNSET
        elif isinstance(self.run, RunView):
            run = self.run.to_dict()
        else:
            run = self.run

        skipped: dict[str, Any] | None | Unset
        if isinstance(self.skipped, Unset):
            skipped = UNSET
        elif isinstance(self.skipped, SkipView):
            skipped = self.skipped.to_dict()
        else:
            skipped = self.skipped

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "kind": kind,
            }
        )
        if at is not UNSET:
            field_dict["at"] = at
        if run is not UNSET:
            field_dict["run"] = run
        if skipped is not UNSET:
            field_dict["skipped"] = skipped

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.run_view import RunView  # noqa: PLC0415
        from ..models.skip_view import SkipView  # noqa: PLC0415

        d = dict(src_dict)
        kind = EntryKind(d.pop("kind"))

        def _parse_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                at_type_0 = datetime.datetime.fromisoformat(data)

                return at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        at = _parse_at(d.pop("at", UNSET))

        def _parse_run(data: object) -> None | RunView | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                run_type_0 = RunView.from_dict(data)

                return run_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RunView | Unset, data)

        run = _parse_run(d.pop("run", UNSET))

        def _parse_skipped(data: object) -> None | SkipView | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                skipped_type_0 = SkipView.from_dict(data)

                return skipped_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | SkipView | Unset, data)

        skipped = _parse_skipped(d.pop("skipped", UNSET))

        timeline_entry = cls(
            kind=kind,
            at=at,
            run=run,
            skipped=skipped,
        )

        timeline_entry.additional_properties = d
        return timeline_entry

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
