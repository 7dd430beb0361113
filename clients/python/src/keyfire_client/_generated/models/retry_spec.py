from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.retry_spec_backoff_type_1 import RetrySpecBackoffType1
from ..models.retry_spec_backoff_type_2_type_1 import RetrySpecBackoffType2Type1
from ..models.retry_spec_backoff_type_3_type_1 import RetrySpecBackoffType3Type1
from ..types import UNSET, Unset

T = TypeVar("T", bound="RetrySpec")


@_attrs_define
class RetrySpec:
    """Retry settings as declared (`retry = { max_attempts = 5, backoff = "exponential", … }`).

    Attributes:
        backoff (None | RetrySpecBackoffType1 | RetrySpecBackoffType2Type1 | RetrySpecBackoffType3Type1 | Unset):
            `fixed` or `exponential` (default).
        interval (None | str | Unset): The fixed interval, or the first delay of an exponential backoff (default `1s`).
        jitter (bool | None | Unset): Randomise exponential delays (between half and all of each), so failing jobs do
            not
            retry in lockstep (default true).
        max_attempts (int | None | Unset): Attempts in all, the first included (default 3). 1 disables retries.
        max_interval (None | str | Unset): Cap of an exponential backoff (default `5m`).
    """

    backoff: (
        None
        | RetrySpecBackoffType1
        | RetrySpecBackoffType2Type1
        | RetrySpecBackoffType3Type1
        | Unset
    ) = UNSET
    interval: None | str | Unset = UNSET
    jitter: bool | None | Unset = UNSET
    max_attempts: int | None | Unset = UNSET
    max_interval: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        backoff: None | str | Unset
        if isinstance(self.backoff, Unset):
            backoff = UNSET
        elif isinstance(self.backoff, RetrySpecBackoffType1):
            backoff = self.backoff.value
        elif isinstance(self.backoff, RetrySpecBackoffType2Type1):
            backoff = self.backoff.value
        elif isinstance(self.backoff, RetrySpecBackoffType3Type1):
            backoff = self.backoff.value
        else:
            backoff = self.backoff

        interval: None | str | Unset
        if isinstance(self.interval, Unset):
            interval = UNSET
        else:
            interval = self.interval

        jitter: bool | None | Unset
        if isinstance(self.jitter, Unset):
            jitter = UNSET
        else:
            jitter = self.jitter

        max_attempts: int | None | Unset
        if isinstance(self.max_attempts, Unset):
            max_attempts = UNSET
        else:
            max_attempts = self.max_attempts

        max_interval: None | str | Unset
        if isinstance(self.max_interval, Unset):
            max_interval = UNSET
        else:
            max_interval = self.max_interval

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if backoff is not UNSET:
            field_dict["backoff"] = backoff
        if interval is not UNSET:
            field_dict["interval"] = interval
        if jitter is not UNSET:
            field_dict["jitter"] = jitter
        if max_attempts is not UNSET:
            field_dict["max_attempts"] = max_attempts
        if max_interval is not UNSET:
            field_dict["max_interval"] = max_interval

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_backoff(
            data: object,
        ) -> (
            None
            | RetrySpecBackoffType1
            | RetrySpecBackoffType2Type1
            | RetrySpecBackoffType3Type1
            | Unset
        ):
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                backoff_type_1 = RetrySpecBackoffType1(data)

                return backoff_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, str):
                    raise TypeError()
                backoff_type_2_type_1 = RetrySpecBackoffType2Type1(data)

                return backoff_type_2_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, str):
                    raise TypeError()
                backoff_type_3_type_1 = RetrySpecBackoffType3Type1(data)

                return backoff_type_3_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(
                None
                | RetrySpecBackoffType1
                | RetrySpecBackoffType2Type1
                | RetrySpecBackoffType3Type1
                | Unset,
                data,
            )

        backoff = _parse_backoff(d.pop("backoff", UNSET))

        def _parse_interval(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        interval = _parse_interval(d.pop("interval", UNSET))

        def _parse_jitter(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        jitter = _parse_jitter(d.pop("jitter", UNSET))

        def _parse_max_attempts(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_attempts = _parse_max_attempts(d.pop("max_attempts", UNSET))

        def _parse_max_interval(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        max_interval = _parse_max_interval(d.pop("max_interval", UNSET))

        retry_spec = cls(
            backoff=backoff,
            interval=interval,
            jitter=jitter,
            max_attempts=max_attempts,
            max_interval=max_interval,
        )

        return retry_spec
