from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="OnComplete")


@_attrs_define
class OnComplete:
    """Where a batch's completion callback goes: one signed POST once every task of the batch has
    ended (succeeded, died, or was cancelled), with the counts. Sent through the callback outbox
    (see `docs/delivery.md`, Callbacks): its `webhook-id` is `batch:<batch id>:completed`.

        Attributes:
            url (str): `http://` or `https://`; the same host rules as the `http` handler's URLs.
            signing_secrets (list[str] | Unset): Secrets to sign it with (`whsec_…`, one, or two while rotating); none:
                those
                configured for the host, if any.
    """

    url: str
    signing_secrets: list[str] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        url = self.url

        signing_secrets: list[str] | Unset = UNSET
        if not isinstance(self.signing_secrets, Unset):
            signing_secrets = self.signing_secrets

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "url": url,
            }
        )
        if signing_secrets is not UNSET:
            field_dict["signing_secrets"] = signing_secrets

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        url = d.pop("url")

        signing_secrets = cast(list[str], d.pop("signing_secrets", UNSET))

        on_complete = cls(
            url=url,
            signing_secrets=signing_secrets,
        )

        return on_complete
