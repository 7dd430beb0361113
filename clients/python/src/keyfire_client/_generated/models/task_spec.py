from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.task_spec_misfire_type_1 import TaskSpecMisfireType1
from ..models.task_spec_misfire_type_2_type_1 import TaskSpecMisfireType2Type1
from ..models.task_spec_misfire_type_3_type_1 import TaskSpecMisfireType3Type1
from ..models.task_spec_overlap_type_1 import TaskSpecOverlapType1
from ..models.task_spec_overlap_type_2_type_1 import TaskSpecOverlapType2Type1
from ..models.task_spec_overlap_type_3_type_1 import TaskSpecOverlapType3Type1
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.dedup_spec import DedupSpec
    from ..models.retry_spec import RetrySpec
    from ..models.task_spec_params_type_0 import TaskSpecParamsType0


T = TypeVar("T", bound="TaskSpec")


@_attrs_define
class TaskSpec:
    """A one-shot task: a job run once, at `at`, `after` a delay, or at once when neither is given. Without an `id` (or
    with an empty or null one) keyfire picks a UUID; leave it out with `dedup`.

        Attributes:
            handler (str): Name of the handler that runs the job. Example: http.
            after (None | str | Unset): One-shot after this delay from creation, such as `10m`.
            after_task (None | str | Unset): One-shot tasks only: run after this one-shot task (its id) succeeded. Until
                then the
                task waits (status `waiting`); `after` is then its delay after that success. If that
                task ends otherwise (dead, cancelled, deleted), this one goes to its dead letters with
                the reason, and so on down a chain. Both live on one shard: leave `id` out (keyfire
                picks one there) or give one on that task's shard.
            at (datetime.datetime | None | Unset): One-shot at this instant (RFC 3339).
            catch_up_limit (int | None | Unset): Most late firings `catch_up` runs (default 100); older ones are recorded as
                missed.
            dedup (DedupSpec | None | Unset):
            end_at (datetime.datetime | None | Unset): Nothing fires after this instant; a job past its end is marked
                finished.
            id (str | Unset): Unique id, chosen by the client: `[A-Za-z0-9][A-Za-z0-9_.-]*`, at most 128 bytes. In
                `PUT /v1/jobs/{id}` it may be left out (the path gives it). Example: nightly-report.
            limit_key (None | str | Unset): The flow-control key this job's firings count against (see `LimitSpec`);
                default:
                `host:<host>` of an `http` job's URL. A key without a registered limit limits nothing.
            misfire (None | TaskSpecMisfireType1 | TaskSpecMisfireType2Type1 | TaskSpecMisfireType3Type1 | Unset):
                `fire_once` (default), `skip` or `catch_up`: what to do with firings found later than
                the tolerance.
            misfire_tolerance (None | str | Unset): How late a firing may be found and still count as on time (default
                `10s`); older
                firings of a recurring job are skipped and counted as missed (one run happens now).
            overlap (None | TaskSpecOverlapType1 | TaskSpecOverlapType2Type1 | TaskSpecOverlapType3Type1 | Unset): `allow`
                (default), `forbid` or `replace`: what to do when a firing comes while the
                job's previous run still runs.
            params (None | TaskSpecParamsType0 | Unset): A JSON object given to the handler; absent (or null) gives none.
            pause_after_failures (int | None | Unset): Pause the job (reason `failures`) after this many firings in a row
                failed (a firing
                fails when its last attempt fails; a success, or a resume, starts the count again).
            retry (None | RetrySpec | Unset):
            start_at (datetime.datetime | None | Unset): Nothing fires before this instant.
            timeout (None | str | Unset): Longest a run may take (default `1h`); a run that takes longer is a failed
                attempt.
            traceparent (None | str | Unset): The W3C `traceparent` of the request that created the job (the REST API takes
                it from
                the request's `traceparent` header when the body gives none): the spans of its
                firings link to that trace when the node exports traces. Example:
                00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.
    """

    handler: str
    after: None | str | Unset = UNSET
    after_task: None | str | Unset = UNSET
    at: datetime.datetime | None | Unset = UNSET
    catch_up_limit: int | None | Unset = UNSET
    dedup: DedupSpec | None | Unset = UNSET
    end_at: datetime.datetime | None | Unset = UNSET
    id: str | Unset = UNSET
    limit_key: None | str | Unset = UNSET
    misfire: (
        None
        | TaskSpecMisfireType1
        | TaskSpecMisfireType2Type1
        | TaskSpecMisfireType3Type1
        | Unset
    ) = UNSET
    misfire_tolerance: None | str | Unset = UNSET
    overlap: (
        None
        | TaskSpecOverlapType1
        | TaskSpecOverlapType2Type1
        | TaskSpecOverlapType3Type1
        | Unset
    ) = UNSET
    params: None | TaskSpecParamsType0 | Unset = UNSET
    pause_after_failures: int | None | Unset = UNSET
    retry: None | RetrySpec | Unset = UNSET
    start_at: datetime.datetime | None | Unset = UNSET
    timeout: None | str | Unset = UNSET
    traceparent: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.dedup_spec import DedupSpec  # noqa: PLC0415
        from ..models.retry_spec import RetrySpec  # noqa: PLC0415
        from ..models.task_spec_params_type_0 import (
            TaskSpecParamsType0,  # noqa: PLC0415
        )

        handler = self.handler

        after: None | str | Unset
        if isinstance(self.after, Unset):
            after = UNSET
        else:
            after = self.after

        after_task: None | str | Unset
        if isinstance(self.after_task, Unset):
            after_task = UNSET
        else:
            after_task = self.after_task

        at: None | str | Unset
        if isinstance(self.at, Unset):
            at = UNSET
        elif isinstance(self.at, datetime.datetime):
            at = self.at.isoformat()
        else:
            at = self.at

        catch_up_limit: int | None | Unset
        if isinstance(self.catch_up_limit, Unset):
            catch_up_limit = UNSET
        else:
            catch_up_limit = self.catch_up_limit

        dedup: dict[str, Any] | None | Unset
        if isinstance(self.dedup, Unset):
            dedup = UNSET
        elif isinstance(self.dedup, DedupSpec):
            dedup = self.dedup.to_dict()
        else:
            dedup = self.dedup

        end_at: None | str | Unset
        if isinstance(self.end_at, Unset):
            end_at = UNSET
        elif isinstance(self.end_at, datetime.datetime):
            end_at = self.end_at.isoformat()
        else:
            end_at = self.end_at

        id = self.id

        limit_key: None | str | Unset
        if isinstance(self.limit_key, Unset):
            limit_key = UNSET
        else:
            limit_key = self.limit_key

        misfire: None | str | Unset
        if isinstance(self.misfire, Unset):
            misfire = UNSET
        elif isinstance(self.misfire, TaskSpecMisfireType1):
            misfire = self.misfire.value
        elif isinstance(self.misfire, TaskSpecMisfireType2Type1):
            misfire = self.misfire.value
        elif isinstance(self.misfire, TaskSpecMisfireType3Type1):
            misfire = self.misfire.value
        else:
            misfire = self.misfire

        misfire_tolerance: None | str | Unset
        if isinstance(self.misfire_tolerance, Unset):
            misfire_tolerance = UNSET
        else:
            misfire_tolerance = self.misfire_tolerance

        overlap: None | str | Unset
        if isinstance(self.overlap, Unset):
            overlap = UNSET
        elif isinstance(self.overlap, TaskSpecOverlapType1):
            overlap = self.overlap.value
        elif isinstance(self.overlap, TaskSpecOverlapType2Type1):
            overlap = self.overlap.value
        elif isinstance(self.overlap, TaskSpecOverlapType3Type1):
            overlap = self.overlap.value
        else:
            overlap = self.overlap

        params: dict[str, Any] | None | Unset
        if isinstance(self.params, Unset):
            params = UNSET
        elif isinstance(self.params, TaskSpecParamsType0):
            params = self.params.to_dict()
        else:
            params = self.params

        pause_after_failures: int | None | Unset
        if isinstance(self.pause_after_failures, Unset):
            pause_after_failures = UNSET
        else:
            pause_after_failures = self.pause_after_failures

        retry: dict[str, Any] | None | Unset
        if isinstance(self.retry, Unset):
            retry = UNSET
        elif isinstance(self.retry, RetrySpec):
            retry = self.retry.to_dict()
        else:
            retry = self.retry

        start_at: None | str | Unset
        if isinstance(self.start_at, Unset):
            start_at = UNSET
        elif isinstance(self.start_at, datetime.datetime):
            start_at = self.start_at.isoformat()
        else:
            start_at = self.start_at

        timeout: None | str | Unset
        if isinstance(self.timeout, Unset):
            timeout = UNSET
        else:
            timeout = self.timeout

        traceparent: None | str | Unset
        if isinstance(self.traceparent, Unset):
            traceparent = UNSET
        else:
            traceparent = self.traceparent

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "handler": handler,
            }
        )
        if after is not UNSET:
            field_dict["after"] = after
        if after_task is not UNSET:
            field_dict["after_task"] = after_task
        if at is not UNSET:
            field_dict["at"] = at
        if catch_up_limit is not UNSET:
            field_dict["catch_up_limit"] = catch_up_limit
        if dedup is not UNSET:
            field_dict["dedup"] = dedup
        if end_at is not UNSET:
            field_dict["end_at"] = end_at
        if id is not UNSET:
            field_dict["id"] = id
        if limit_key is not UNSET:
            field_dict["limit_key"] = limit_key
        if misfire is not UNSET:
            field_dict["misfire"] = misfire
        if misfire_tolerance is not UNSET:
            field_dict["misfire_tolerance"] = misfire_tolerance
        if overlap is not UNSET:
            field_dict["overlap"] = overlap
        if params is not UNSET:
            field_dict["params"] = params
        if pause_after_failures is not UNSET:
            field_dict["pause_after_failures"] = pause_after_failures
        if retry is not UNSET:
            field_dict["retry"] = retry
        if start_at is not UNSET:
            field_dict["start_at"] = start_at
        if timeout is not UNSET:
            field_dict["timeout"] = timeout
        if traceparent is not UNSET:
            field_dict["traceparent"] = traceparent

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.dedup_spec import DedupSpec  # noqa: PLC0415
        from ..models.retry_spec import RetrySpec  # noqa: PLC0415
        from ..models.task_spec_params_type_0 import (
            TaskSpecParamsType0,  # noqa: PLC0415
        )

        d = dict(src_dict)
        handler = d.pop("handler")

        def _parse_after(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        after = _parse_after(d.pop("after", UNSET))

        def _parse_after_task(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        after_task = _parse_after_task(d.pop("after_task", UNSET))

        def _parse_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                at_type_0 = datetime.datetime.fromisoformat(data)

                return at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        at = _parse_at(d.pop("at", UNSET))

        def _parse_catch_up_limit(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        catch_up_limit = _parse_catch_up_limit(d.pop("catch_up_limit", UNSET))

        def _parse_dedup(data: object) -> DedupSpec | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                dedup_type_0 = DedupSpec.from_dict(data)

                return dedup_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(DedupSpec | None | Unset, data)

        dedup = _parse_dedup(d.pop("dedup", UNSET))

        def _parse_end_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                end_at_type_0 = datetime.datetime.fromisoformat(data)

                return end_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        end_at = _parse_end_at(d.pop("end_at", UNSET))

        id = d.pop("id", UNSET)

        def _parse_limit_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        limit_key = _parse_limit_key(d.pop("limit_key", UNSET))

        def _parse_misfire(
            data: object,
        ) -> (
            None
            | TaskSpecMisfireType1
            | TaskSpecMisfireType2Type1
            | TaskSpecMisfireType3Type1
            | Unset
        ):
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                misfire_type_1 = TaskSpecMisfireType1(data)

                return misfire_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, str):
                    raise TypeError()
                misfire_type_2_type_1 = TaskSpecMisfireType2Type1(data)

                return misfire_type_2_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, str):
                    raise TypeError()
                misfire_type_3_type_1 = TaskSpecMisfireType3Type1(data)

                return misfire_type_3_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(
                None
                | TaskSpecMisfireType1
                | TaskSpecMisfireType2Type1
                | TaskSpecMisfireType3Type1
                | Unset,
                data,
            )

        misfire = _parse_misfire(d.pop("misfire", UNSET))

        def _parse_misfire_tolerance(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        misfire_tolerance = _parse_misfire_tolerance(d.pop("misfire_tolerance", UNSET))

        def _parse_overlap(
            data: object,
        ) -> (
            None
            | TaskSpecOverlapType1
            | TaskSpecOverlapType2Type1
            | TaskSpecOverlapType3Type1
            | Unset
        ):
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                overlap_type_1 = TaskSpecOverlapType1(data)

                return overlap_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, str):
                    raise TypeError()
                overlap_type_2_type_1 = TaskSpecOverlapType2Type1(data)

                return overlap_type_2_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, str):
                    raise TypeError()
                overlap_type_3_type_1 = TaskSpecOverlapType3Type1(data)

                return overlap_type_3_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(
                None
                | TaskSpecOverlapType1
                | TaskSpecOverlapType2Type1
                | TaskSpecOverlapType3Type1
                | Unset,
                data,
            )

        overlap = _parse_overlap(d.pop("overlap", UNSET))

        def _parse_params(data: object) -> None | TaskSpecParamsType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                params_type_0 = TaskSpecParamsType0.from_dict(data)

                return params_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | TaskSpecParamsType0 | Unset, data)

        params = _parse_params(d.pop("params", UNSET))

        def _parse_pause_after_failures(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        pause_after_failures = _parse_pause_after_failures(
            d.pop("pause_after_failures", UNSET)
        )

        def _parse_retry(data: object) -> None | RetrySpec | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                retry_type_0 = RetrySpec.from_dict(data)

                return retry_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetrySpec | Unset, data)

        retry = _parse_retry(d.pop("retry", UNSET))

        def _parse_start_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                start_at_type_0 = datetime.datetime.fromisoformat(data)

                return start_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        start_at = _parse_start_at(d.pop("start_at", UNSET))

        def _parse_timeout(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        timeout = _parse_timeout(d.pop("timeout", UNSET))

        def _parse_traceparent(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        traceparent = _parse_traceparent(d.pop("traceparent", UNSET))

        task_spec = cls(
            handler=handler,
            after=after,
            after_task=after_task,
            at=at,
            catch_up_limit=catch_up_limit,
            dedup=dedup,
            end_at=end_at,
            id=id,
            limit_key=limit_key,
            misfire=misfire,
            misfire_tolerance=misfire_tolerance,
            overlap=overlap,
            params=params,
            pause_after_failures=pause_after_failures,
            retry=retry,
            start_at=start_at,
            timeout=timeout,
            traceparent=traceparent,
        )

        return task_spec
