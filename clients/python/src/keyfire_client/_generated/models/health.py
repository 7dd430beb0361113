from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.health_checks import HealthChecks


T = TypeVar("T", bound="Health")


@_attrs_define
class Health:
    """Status of `/healthz` and `/readyz`.

    Attributes:
        checks (HealthChecks): Each check and its result (`ok` or what is wrong); empty for `/healthz`.
        status (str): `ok`, `ready` or `not_ready`.
    """

    checks: HealthChecks
    status: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        checks = self.checks.to_dict()

        status = self.status

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "checks": checks,
                "status": status,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.health_checks import HealthChecks  # noqa: PLC0415

        d = dict(src_dict)
        checks = HealthChecks.from_dict(d.pop("checks"))

        status = d.pop("status")

        health = cls(
            checks=checks,
            status=status,
        )

        health.additional_properties = d
        return health

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
