from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.add_task import AddTask
    from ..models.on_complete import OnComplete


T = TypeVar("T", bound="TopicBatch")


@_attrs_define
class TopicBatch:
    """Tasks to add to one topic.

    Attributes:
        tasks (list[AddTask]): 1 to 1000 tasks, as `POST /v1/topics/{topic}/tasks` takes them (with `on_complete`:
            without `id` or `dedup`, keyfire picks the ids).
        on_complete (None | OnComplete | Unset):
    """

    tasks: list[AddTask]
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
        from ..models.add_task import AddTask  # noqa: PLC0415
        from ..models.on_complete import OnComplete  # noqa: PLC0415

        d = dict(src_dict)
        tasks = []
        _tasks = d.pop("tasks")
        for tasks_item_data in _tasks:
            tasks_item = AddTask.from_dict(tasks_item_data)

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

        topic_batch = cls(
            tasks=tasks,
            on_complete=on_complete,
        )

        return topic_batch
