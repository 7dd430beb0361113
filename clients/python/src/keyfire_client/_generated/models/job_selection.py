from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="JobSelection")


@_attrs_define
class JobSelection:
    """Which jobs to act on: exactly one of `handler` and `id_prefix`.

    Attributes:
        handler (str | Unset): Every job (one-shot tasks included) whose handler is this one.
        id_prefix (str | Unset): Every job whose id starts with this (such as `billing-`).
    """

    handler: str | Unset = UNSET
    id_prefix: str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        handler = self.handler

        id_prefix = self.id_prefix

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if handler is not UNSET:
            field_dict["handler"] = handler
        if id_prefix is not UNSET:
            field_dict["id_prefix"] = id_prefix

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        handler = d.pop("handler", UNSET)

        id_prefix = d.pop("id_prefix", UNSET)

        job_selection = cls(
            handler=handler,
            id_prefix=id_prefix,
        )

        return job_selection
