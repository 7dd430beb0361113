from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.dedup_spec_on_duplicate_type_1 import DedupSpecOnDuplicateType1
from ..models.dedup_spec_on_duplicate_type_2_type_1 import (
    DedupSpecOnDuplicateType2Type1,
)
from ..models.dedup_spec_on_duplicate_type_3_type_1 import (
    DedupSpecOnDuplicateType3Type1,
)
from ..types import UNSET, Unset

T = TypeVar("T", bound="DedupSpec")


@_attrs_define
class DedupSpec:
    """How a task is deduplicated: give `key`, or `content: true` to derive the key from the
    task's handler and params; and a `window`.

    Enqueueing a task whose key was enqueued within the window (counted from the first
    enqueue; duplicates do not extend it) returns the task created then, flagged as a
    duplicate, and creates nothing. After the window a new task is created.

        Attributes:
            window (str): How long the key holds after the first enqueue: more than zero, at most `24h`. A
                duplicate that replaces or extends the task renews it (from the duplicate). Example: 10m.
            content (bool | Unset): Derive the key from the task's content instead: a SHA-256 of its handler and params
                (JSON with sorted object keys). Its instant is not part of it.
            key (None | str | Unset): The dedup key chosen by the caller (1 to 256 characters, no control characters), such
                as
                `order-1234:receipt`. One namespace per keyfire prefix. Example: order-1234:receipt.
            on_duplicate (DedupSpecOnDuplicateType1 | DedupSpecOnDuplicateType2Type1 | DedupSpecOnDuplicateType3Type1 | None
                | Unset): What a duplicate does to the pending task the key names: `keep` (default: nothing),
                `replace` (the task takes the duplicate's params or payload), `extend` (its due instant
                moves to the duplicate's, never earlier) or `replace_extend` (both). Once that task was
                claimed (popped), a duplicate under `replace`/`extend` creates a new task. Example: extend.
    """

    window: str
    content: bool | Unset = UNSET
    key: None | str | Unset = UNSET
    on_duplicate: (
        DedupSpecOnDuplicateType1
        | DedupSpecOnDuplicateType2Type1
        | DedupSpecOnDuplicateType3Type1
        | None
        | Unset
    ) = UNSET

    def to_dict(self) -> dict[str, Any]:
        window = self.window

        content = self.content

        key: None | str | Unset
        if isinstance(self.key, Unset):
            key = UNSET
        else:
            key = self.key

        on_duplicate: None | str | Unset
        if isinstance(self.on_duplicate, Unset):
            on_duplicate = UNSET
        elif isinstance(self.on_duplicate, DedupSpecOnDuplicateType1):
            on_duplicate = self.on_duplicate.value
        elif isinstance(self.on_duplicate, DedupSpecOnDuplicateType2Type1):
            on_duplicate = self.on_duplicate.value
        elif isinstance(self.on_duplicate, DedupSpecOnDuplicateType3Type1):
            on_duplicate = self.on_duplicate.value
        else:
            on_duplicate = self.on_duplicate

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "window": window,
            }
        )
        if content is not UNSET:
            field_dict["content"] = content
        if key is not UNSET:
            field_dict["key"] = key
        if on_duplicate is not UNSET:
            field_dict["on_duplicate"] = on_duplicate

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        window = d.pop("window")

        content = d.pop("content", UNSET)

        def _parse_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        key = _parse_key(d.pop("key", UNSET))

        def _parse_on_duplicate(
            data: object,
        ) -> (
            DedupSpecOnDuplicateType1
            | DedupSpecOnDuplicateType2Type1
            | DedupSpecOnDuplicateType3Type1
            | None
            | Unset
        ):
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                on_duplicate_type_1 = DedupSpecOnDuplicateType1(data)

                return on_duplicate_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, str):
                    raise TypeError()
                on_duplicate_type_2_type_1 = DedupSpecOnDuplicateType2Type1(data)

                return on_duplicate_type_2_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, str):
                    raise TypeError()
                on_duplicate_type_3_type_1 = DedupSpecOnDuplicateType3Type1(data)

                return on_duplicate_type_3_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(
                DedupSpecOnDuplicateType1
                | DedupSpecOnDuplicateType2Type1
                | DedupSpecOnDuplicateType3Type1
                | None
                | Unset,
                data,
            )

        on_duplicate = _parse_on_duplicate(d.pop("on_duplicate", UNSET))

        dedup_spec = cls(
            window=window,
            content=content,
            key=key,
            on_duplicate=on_duplicate,
        )

        return dedup_spec
