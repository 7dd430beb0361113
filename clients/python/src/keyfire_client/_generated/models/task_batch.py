from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.on_complete import OnComplete
    from ..models.task_spec import TaskSpec


T = TypeVar("T", bound="TaskBatch")


@_attrs_define
class TaskBatch:
    """Tasks to enqueue together.

    Attributes:
        tasks (list[TaskSpec]): One-shot tasks (see `TaskSpec`), at most 1000.
        on_complete (None | OnComplete | Unset):
    """

    tasks: list[TaskSpec]
    on_complete: None | OnComplete | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.on_complete import OnComplete  # noqa: PLC0415

        tasks = []
        for tasks_item_data in self.tasks:
            tasks_item = tasks_item_data.to_dict()
            tasks.append(tasks_item)

        on_complete: dict[str, Any] | None | Unset
        if isinstance(self.on_complete, Unset):
            on_complete = UNSET
        elif isinstance(self.on_complete, OnComplete):
            on_complete = self.on_complete.to_dict()
        else:
            on_complete = self.on_complete

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "tasks": tasks,
            }
        )
        if on_complete is not UNSET:
            field_dict["on_complete"] = on_complete

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.on_complete import OnComplete  # noqa: PLC0415
        from ..models.task_spec import TaskSpec  # noqa: PLC0415

        d = dict(src_dict)
        tasks = []
        _tasks = d.pop("tasks")
        for tasks_item_data in _tasks:
            tasks_item = TaskSpec.from_dict(tasks_item_data)

            tasks.append(tasks_item)

        def _parse_on_complete(data: object) -> None | OnComplete | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                on_complete_type_0 = OnComplete.from_dict(data)

                return on_complete_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | OnComplete | Unset, data)

        on_complete = _parse_on_complete(d.pop("on_complete", UNSET))

        task_batch = cls(
            tasks=tasks,
            on_complete=on_complete,
        )

        return task_batch
