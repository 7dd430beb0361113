from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="RunLimitsView")


@_attrs_define
class RunLimitsView:
    """A job's run limits at work.

    Attributes:
        failure_streak (int): Failed firings in a row, counted toward `pause_after_failures` (a success or a resume
            sets it back to 0).
        succeeded (int): Successful firings of the schedule, counted toward `max_runs`.
        stopped (None | str | Unset): Why keyfire stopped the job itself: `max_runs` (finished: it reached `max_runs`
            successful firings) or `failures` (paused: `pause_after_failures` firings in a row
            failed); absent when they did not stop it. Example: failures.
    """

    failure_streak: int
    succeeded: int
    stopped: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        failure_streak = self.failure_streak

        succeeded = self.succeeded

        stopped: None | str | Unset
        if isinstance(self.stopped, Unset):
            stopped = UNSET
        else:
            stopped = self.stopped

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "failure_streak": failure_streak,
                "succeeded": succeeded,
            }
        )
        if stopped is not UNSET:
            field_dict["stopped"] = stopped

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        failure_streak = d.pop("failure_streak")

        succeeded = d.pop("succeeded")

        def _parse_stopped(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        stopped = _parse_stopped(d.pop("stopped", UNSET))

        run_limits_view = cls(
            failure_streak=failure_streak,
            succeeded=succeeded,
            stopped=stopped,
        )

        run_limits_view.additional_properties = d
        return run_limits_view

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
