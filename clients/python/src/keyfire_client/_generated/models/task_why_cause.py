from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.task_why_code import TaskWhyCode

T = TypeVar("T", bound="TaskWhyCause")


@_attrs_define
class TaskWhyCause:
    """One reason, in a sentence.

    Attributes:
        code (TaskWhyCode): A reason a task is where it is.
        message (str): What it means for this task.
    """

    code: TaskWhyCode
    message: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        code = self.code.value

        message = self.message

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "code": code,
                "message": message,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        code = TaskWhyCode(d.pop("code"))

        message = d.pop("message")

        task_why_cause = cls(
            code=code,
            message=message,
        )

        task_why_cause.additional_properties = d
        return task_why_cause

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
