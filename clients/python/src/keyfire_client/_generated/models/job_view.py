from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.firing_time import FiringTime
    from ..models.run_limits_view import RunLimitsView
    from ..models.stored_job_spec_type_0 import StoredJobSpecType0
    from ..models.stored_job_spec_type_1 import StoredJobSpecType1
    from ..models.stored_job_spec_type_2 import StoredJobSpecType2


T = TypeVar("T", bound="JobView")


@_attrs_define
class JobView:
    """A job as the API shows it: its spec, its state, and its next firings.

    Attributes:
        failures (int): Runs that failed.
        id (str): The job's id.
        missed (int): Firings skipped under the misfire policy.
        next_firings (list[FiringTime]): The next five firings (fewer when the schedule ends; none while paused or
            finished).
        runs (int): Runs started (attempts claimed; a run in progress counts).
        spec (StoredJobSpecType0 | StoredJobSpecType1 | StoredJobSpecType2): A job's spec as stored and shown: `after`
            resolved to `at`, signing secrets redacted.
        status (str): `active`, `paused`, `finished`, or `waiting` (a task waiting for its `after_task`). Example:
            active.
        tz (str): The zone `next_firings[].local` is shown in (the cron `tz`, else `UTC`).
        version (int): Bumped by every change of the spec; send it back in `If-Match` to update only that version.
        created_at (datetime.datetime | None | Unset): When the job was created.
        dead (int | Unset): Firings that used up their attempts and became dead letters.
        deduplicated (None | str | Unset): Only in the answer to an enqueue that was a duplicate: what it did to this
            task, as its
            `dedup.on_duplicate` says: `kept`, `replaced`, `extended` or `replaced_extended`. Example: extended.
        duplicate (bool | Unset): Only in the answer to an enqueue, and only when true: a task enqueued with the same
            dedup key within its window exists, and this is that task (nothing was created).
        last_at (datetime.datetime | None | Unset): The last claimed firing.
        next_at (datetime.datetime | None | Unset): The next pending firing.
        run_limits (None | RunLimitsView | Unset):
        skipped (int | Unset): Firings skipped because the previous run still ran (overlap `forbid`).
        triggered (int | Unset): Runs started by hand (`trigger`).
        updated_at (datetime.datetime | None | Unset): When it last changed.
    """

    failures: int
    id: str
    missed: int
    next_firings: list[FiringTime]
    runs: int
    spec: StoredJobSpecType0 | StoredJobSpecType1 | StoredJobSpecType2
    status: str
    tz: str
    version: int
    created_at: datetime.datetime | None | Unset = UNSET
    dead: int | Unset = UNSET
    deduplicated: None | str | Unset = UNSET
    duplicate: bool | Unset = UNSET
    last_at: datetime.datetime | None | Unset = UNSET
    next_at: datetime.datetime | None | Unset = UNSET
    run_limits: None | RunLimitsView | Unset = UNSET
    skipped: int | Unset = UNSET
    triggered: int | Unset = UNSET
    updated_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.run_limits_view import RunLimitsView  # noqa: PLC0415
        from ..models.stored_job_spec_type_0 import StoredJobSpecType0  # noqa: PLC0415
        from ..models.stored_job_spec_type_1 import StoredJobSpecType1  # noqa: PLC0415

        failures = self.failures

        id = self.id

        missed = self.missed

        next_firings = []
        for next_firings_item_data in self.next_firings:
            next_firings_item = next_firings_item_data.to_dict()
            next_firings.append(next_firings_item)

        runs = self.runs

        spec: dict[str, Any]
        if isinstance(self.spec, StoredJobSpecType0):
            spec = self.spec.to_dict()
        elif isinstance(self.spec, StoredJobSpecType1):
            spec = self.spec.to_dict()
        else:
            spec = self.spec.to_dict()

        status = self.status

        tz = self.tz

        version = self.version

        created_at: None | str | Unset
        if isinstance(self.created_at, Unset):
            created_at = UNSET
        elif isinstance(self.created_at, datetime.datetime):
            created_at = self.created_at.isoformat()
        else:
            created_at = self.created_at

        dead = self.dead

        deduplicated: None | str | Unset
        if isinstance(self.deduplicated, Unset):
            deduplicated = UNSET
        else:
            deduplicated = self.deduplicated

        duplicate = self.duplicate

        last_at: None | str | Unset
        if isinstance(self.last_at, Unset):
            last_at = UNSET
        elif isinstance(self.last_at, datetime.datetime):
            last_at = self.last_at.isoformat()
        else:
            last_at = self.last_at

        next_at: None | str | Unset
        if isinstance(self.next_at, Unset):
            next_at = UNSET
        elif isinstance(self.next_at, datetime.datetime):
            next_at = self.next_at.isoformat()
        else:
            next_at = self.next_at

        run_limits: dict[str, Any] | None | Unset
        if isinstance(self.run_limits, Unset):
            run_limits = UNSET
        elif isinstance(self.run_limits, RunLimitsView):
            run_limits = self.run_limits.to_dict()
        else:
            run_limits = self.run_limits

        skipped = self.skipped

        triggered = self.triggered

        updated_at: None | str | Unset
        if isinstance(self.updated_at, Unset):
            updated_at = UNSET
        elif isinstance(self.updated_at, datetime.datetime):
            updated_at = self.updated_at.isoformat()
        else:
            updated_at = self.updated_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "failures": failures,
                "id": id,
                "missed": missed,
                "next_firings": next_firings,
                "runs": runs,
                "spec": spec,
                "status": status,
                "tz": tz,
                "version": version,
            }
        )
        if created_at is not UNSET:
            field_dict["created_at"] = created_at
        if dead is not UNSET:
            field_dict["dead"] = dead
        if deduplicated is not UNSET:
            field_dict["deduplicated"] = deduplicated
        if duplicate is not UNSET:
            field_dict["duplicate"] = duplicate
        if last_at is not UNSET:
            field_dict["last_at"] = last_at
        if next_at is not UNSET:
            field_dict["next_at"] = next_at
        if run_limits is not UNSET:
            field_dict["run_limits"] = run_limits
        if skipped is not UNSET:
            field_dict["skipped"] = skipped
        if triggered is not UNSET:
            field_dict["triggered"] = triggered
        if updated_at is not UNSET:
            field_dict["updated_at"] = updated_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.firing_time import FiringTime  # noqa: PLC0415
        from ..models.run_limits_view import RunLimitsView  # noqa: PLC0415
        from ..models.stored_job_spec_type_0 import StoredJobSpecType0  # noqa: PLC0415
        from ..models.stored_job_spec_type_1 import StoredJobSpecType1  # noqa: PLC0415
        from ..models.stored_job_spec_type_2 import StoredJobSpecType2  # noqa: PLC0415

        d = dict(src_dict)
        failures = d.pop("failures")

        id = d.pop("id")

        missed = d.pop("missed")

        next_firings = []
        _next_firings = d.pop("next_firings")
        for next_firings_item_data in _next_firings:
            next_firings_item = FiringTime.from_dict(next_firings_item_data)

            next_firings.append(next_firings_item)

        runs = d.pop("runs")

        def _parse_spec(
            data: object,
        ) -> StoredJobSpecType0 | StoredJobSpecType1 | StoredJobSpecType2:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_stored_job_spec_type_0 = StoredJobSpecType0.from_dict(
                    data
                )

                return componentsschemas_stored_job_spec_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_stored_job_spec_type_1 = StoredJobSpecType1.from_dict(
                    data
                )

                return componentsschemas_stored_job_spec_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_stored_job_spec_type_2 = StoredJobSpecType2.from_dict(
                data
            )

            return componentsschemas_stored_job_spec_type_2

        spec = _parse_spec(d.pop("spec"))

        status = d.pop("status")

        tz = d.pop("tz")

        version = d.pop("version")

        def _parse_created_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                created_at_type_0 = datetime.datetime.fromisoformat(data)

                return created_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        created_at = _parse_created_at(d.pop("created_at", UNSET))

        dead = d.pop("dead", UNSET)

        def _parse_deduplicated(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        deduplicated = _parse_deduplicated(d.pop("deduplicated", UNSET))

        duplicate = d.pop("duplicate", UNSET)

        def _parse_last_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_at_type_0 = datetime.datetime.fromisoformat(data)

                return last_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        last_at = _parse_last_at(d.pop("last_at", UNSET))

        def _parse_next_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                next_at_type_0 = datetime.datetime.fromisoformat(data)

                return next_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        next_at = _parse_next_at(d.pop("next_at", UNSET))

        def _parse_run_limits(data: object) -> None | RunLimitsView | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                run_limits_type_0 = RunLimitsView.from_dict(data)

                return run_limits_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RunLimitsView | Unset, data)

        run_limits = _parse_run_limits(d.pop("run_limits", UNSET))

        skipped = d.pop("skipped", UNSET)

        triggered = d.pop("triggered", UNSET)

        def _parse_updated_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                updated_at_type_0 = datetime.datetime.fromisoformat(data)

                return updated_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        updated_at = _parse_updated_at(d.pop("updated_at", UNSET))

        job_view = cls(
            failures=failures,
            id=id,
            missed=missed,
            next_firings=next_firings,
            runs=runs,
            spec=spec,
            status=status,
            tz=tz,
            version=version,
            created_at=created_at,
            dead=dead,
            deduplicated=deduplicated,
            duplicate=duplicate,
            last_at=last_at,
            next_at=next_at,
            run_limits=run_limits,
            skipped=skipped,
            triggered=triggered,
            updated_at=updated_at,
        )

        job_view.additional_properties = d
        return job_view

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
