from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.dead_summary import DeadSummary
    from ..models.job_counts import JobCounts
    from ..models.node_view import NodeView
    from ..models.queues import Queues
    from ..models.totals import Totals


T = TypeVar("T", bound="Overview")


@_attrs_define
class Overview:
    """The cluster at a glance.

    Attributes:
        dead_letters (DeadSummary): Dead letters waiting, among the jobs read.
        jobs (JobCounts): Jobs by status.
        nodes (list[NodeView]): The live nodes, by id.
        now (datetime.datetime): Redis's clock when this was read.
        queues (Queues): Sizes of the scheduling sets.
        totals (Totals): Cumulative counters of the jobs read (jobs deleted since take theirs with them).
    """

    dead_letters: DeadSummary
    jobs: JobCounts
    nodes: list[NodeView]
    now: datetime.datetime
    queues: Queues
    totals: Totals
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dead_letters = self.dead_letters.to_dict()

        jobs = self.jobs.to_dict()

        nodes = []
        for nodes_item_data in self.nodes:
            nodes_item = nodes_item_data.to_dict()
            nodes.append(nodes_item)

        now = self.now.isoformat()

        queues = self.queues.to_dict()

        totals = self.totals.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dead_letters": dead_letters,
                "jobs": jobs,
                "nodes": nodes,
                "now": now,
                "queues": queues,
                "totals": totals,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.dead_summary import DeadSummary  # noqa: PLC0415
        from ..models.job_counts import JobCounts  # noqa: PLC0415
        from ..models.node_view import NodeView  # noqa: PLC0415
        from ..models.queues import Queues  # noqa: PLC0415
        from ..models.totals import Totals  # noqa: PLC0415

        d = dict(src_dict)
        dead_letters = DeadSummary.from_dict(d.pop("dead_letters"))

        jobs = JobCounts.from_dict(d.pop("jobs"))

        nodes = []
        _nodes = d.pop("nodes")
        for nodes_item_data in _nodes:
            nodes_item = NodeView.from_dict(nodes_item_data)

            nodes.append(nodes_item)

        now = datetime.datetime.fromisoformat(d.pop("now"))

        queues = Queues.from_dict(d.pop("queues"))

        totals = Totals.from_dict(d.pop("totals"))

        overview = cls(
            dead_letters=dead_letters,
            jobs=jobs,
            nodes=nodes,
            now=now,
            queues=queues,
            totals=totals,
        )

        overview.additional_properties = d
        return overview

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
