from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.task_spec import TaskSpec


T = TypeVar("T", bound="TaskBatch")


@_attrs_define
class TaskBatch:
    """Tasks to enqueue together.

    Attributes:
        tasks (list[TaskSpec]): One-shot tasks (see `TaskSpec`), at most 1000.
    """

    tasks: list[TaskSpec]

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
        from ..models.task_spec import TaskSpec  # noqa: PLC0415

        d = dict(src_dict)
        tasks = []
        _tasks = d.pop("tasks")
        for tasks_item_data in _tasks:
            tasks_item = TaskSpec.from_dict(tasks_item_data)

            tasks.append(tasks_item)

        task_batch = cls(
            tasks=tasks,
        )

        return task_batch
