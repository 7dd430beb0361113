from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.finish_item import FinishItem


T = TypeVar("T", bound="FinishMany")


@_attrs_define
class FinishMany:
    """A batch finish: the tasks, with the tokens their pops returned.

    Attributes:
        tasks (list[FinishItem]): 1 to 1000 tasks.
    """

    tasks: list[FinishItem]

    def to_dict(self) -> dict[str, Any]:
        tasks = []
        for tasks_item_data in self.tasks:
            tasks_item = tasks_item_data.to_dict()
            tasks.append(tasks_item)

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "tasks": tasks,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.finish_item import FinishItem  # noqa: PLC0415

        d = dict(src_dict)
        tasks = []
        _tasks = d.pop("tasks")
        for tasks_item_data in _tasks:
            tasks_item = FinishItem.from_dict(tasks_item_data)

            tasks.append(tasks_item)

        finish_many = cls(
            tasks=tasks,
        )

        return finish_many
