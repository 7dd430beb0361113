from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ErrorDetail")


@_attrs_define
class ErrorDetail:
    """What went wrong.

    Attributes:
        code (str): One of `malformed_json` (400), `bad_query` (400), `bad_path` (400), `bad_request` (400:
            a header such as `If-Match` is not what it must be), `unauthorized`
            (401), `forbidden` (403), `not_found` (404), `method_not_allowed` (405), `conflict`
            (409), `nothing_to_cancel` (409: a cancel found nothing in progress), `payload_too_large` (413),
            `unsupported_media_type` (415), `invalid` (422),
            `internal` (500), `unavailable` (503), `redis_full` (507: Redis reached its
            `maxmemory` and refuses writes; a `Retry-After` header comes with it). Example: invalid.
        message (str): What went wrong, in words a person can act on. Example: invalid cron: expected 5 fields (6 with
            seconds) or a macro like @hourly, got 3.
        field (None | str | Unset): The input field at fault (`cron`, `tz`, `tasks[2].at`, the query parameter), or
            null. Example: cron.
    """

    code: str
    message: str
    field: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        code = self.code

        message = self.message

        field: None | str | Unset
        if isinstance(self.field, Unset):
            field = UNSET
        else:
            field = self.field

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "code": code,
                "message": message,
            }
        )
        if field is not UNSET:
            field_dict["field"] = field

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        code = d.pop("code")

        message = d.pop("message")

        def _parse_field(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        field = _parse_field(d.pop("field", UNSET))

        error_detail = cls(
            code=code,
            message=message,
            field=field,
        )

        error_detail.additional_properties = d
        return error_detail

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
