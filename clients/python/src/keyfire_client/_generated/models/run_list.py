from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.run_view import RunView
    from ..models.timeline_entry import TimelineEntry


T = TypeVar("T", bound="RunList")


@_attrs_define
class RunList:
    """A job's runs, newest first.

    Attributes:
        runs (list[RunView]): The runs.
        timeline (list[TimelineEntry] | None | Unset): With `include=skipped`: the runs and the instants that did not
            run, newest first.
    """

    runs: list[RunView]
    timeline: list[TimelineEntry] | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        runs = []
        for runs_item_data in self.runs:
            runs_item = runs_item_data.to_dict()
            runs.append(runs_item)

        timeline: list[dict[str, Any]] | None | Unset
        if isinstance(self.timeline, Unset):
            timeline = UNSET
        elif isinstance(self.timeline, list):
            timeline = []
            for timeline_type_0_item_data in self.timeline:
                timeline_type_0_item = timeline_type_0_item_data.to_dict()
                timeline.append(timeline_type_0_item)

        else:
            timeline = self.timeline

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "runs": runs,
            }
        )
        if timeline is not UNSET:
            field_dict["timeline"] = timeline

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.run_view import RunView  # noqa: PLC0415
        from ..models.timeline_entry import TimelineEntry  # noqa: PLC0415

        d = dict(src_dict)
        runs = []
        _runs = d.pop("runs")
        for runs_item_data in _runs:
            runs_item = RunView.from_dict(runs_item_data)

            runs.append(runs_item)

        def _parse_timeline(data: object) -> list[TimelineEntry] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                timeline_type_0 = []
                _timeline_type_0 = data
                for timeline_type_0_item_data in _timeline_type_0:
                    timeline_type_0_item = TimelineEntry.from_dict(
                        timeline_type_0_item_data
                    )

                    timeline_type_0.append(timeline_type_0_item)

                return timeline_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[TimelineEntry] | None | Unset, data)

        timeline = _parse_timeline(d.pop("timeline", UNSET))

        run_list = cls(
            runs=runs,
            timeline=timeline,
        )

        run_list.additional_properties = d
        return run_list

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
