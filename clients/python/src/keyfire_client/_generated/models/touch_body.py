from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="TouchBody")


@_attrs_define
class TouchBody:
    """The reservation a touch extends.

    Attributes:
        token (str): The token the pop returned.
        ttr (None | str | Unset): The new time-to-run from now (default: the task's own). Example: 60s.
    """

    token: str
    ttr: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        token = self.token

        ttr: None | str | Unset
        if isinstance(self.ttr, Unset):
            ttr = UNSET
        else:
            ttr = self.ttr

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "token": token,
            }
        )
        if ttr is not UNSET:
            field_dict["ttr"] = ttr

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        token = d.pop("token")

        def _parse_ttr(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        ttr = _parse_ttr(d.pop("ttr", UNSET))

        touch_body = cls(
            token=token,
            ttr=ttr,
        )

        return touch_body
