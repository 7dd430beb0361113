from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="NodeView")


@_attrs_define
class NodeView:
    """A live node.

    Attributes:
        handlers (list[str]): Handlers it has registered.
        id (str): The node's id.
        last_seen_at (datetime.datetime | None | Unset): Its last heartbeat (Redis time).
        load (float | None | Unset): `running / max_concurrent_runs`, from 0 to 1.
        max_concurrent_runs (int | None | Unset): Its limit of concurrent runs.
        running (int | None | Unset): Runs in progress at its last heartbeat.
        runs_started (int | None | Unset): Attempts it started since it started (at its last heartbeat).
        share (float | None | Unset): Its share of the attempts the live nodes started, from 0 to 1: the owner hash
            spreads
            runs evenly, so each of N nodes that started together is near 1/N.
        version (None | str | Unset): Its keyfire version.
    """

    handlers: list[str]
    id: str
    last_seen_at: datetime.datetime | None | Unset = UNSET
    load: float | None | Unset = UNSET
    max_concurrent_runs: int | None | Unset = UNSET
    running: int | None | Unset = UNSET
    runs_started: int | None | Unset = UNSET
    share: float | None | Unset = UNSET
    version: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        handlers = self.handlers

        id = self.id

        last_seen_at: None | str | Unset
        if isinstance(self.last_seen_at, Unset):
            last_seen_at = UNSET
        elif isinstance(self.last_seen_at, datetime.datetime):
            last_seen_at = self.last_seen_at.isoformat()
        else:
            last_seen_at = self.last_seen_at

        load: float | None | Unset
        if isinstance(self.load, Unset):
            load = UNSET
        else:
            load = self.load

        max_concurrent_runs: int | None | Unset
        if isinstance(self.max_concurrent_runs, Unset):
            max_concurrent_runs = UNSET
        else:
            max_concurrent_runs = self.max_concurrent_runs

        running: int | None | Unset
        if isinstance(self.running, Unset):
            running = UNSET
        else:
            running = self.running

        runs_started: int | None | Unset
        if isinstance(self.runs_started, Unset):
            runs_started = UNSET
        else:
            runs_started = self.runs_started

        share: float | None | Unset
        if isinstance(self.share, Unset):
            share = UNSET
        else:
            share = self.share

        version: None | str | Unset
        if isinstance(self.version, Unset):
            version = UNSET
        else:
            version = self.version

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "handlers": handlers,
                "id": id,
            }
        )
        if last_seen_at is not UNSET:
            field_dict["last_seen_at"] = last_seen_at
        if load is not UNSET:
            field_dict["load"] = load
        if max_concurrent_runs is not UNSET:
            field_dict["max_concurrent_runs"] = max_concurrent_runs
        if running is not UNSET:
            field_dict["running"] = running
        if runs_started is not UNSET:
            field_dict["runs_started"] = runs_started
        if share is not UNSET:
            field_dict["share"] = share
        if version is not UNSET:
            field_dict["version"] = version

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        handlers = cast(list[str], d.pop("handlers"))

        id = d.pop("id")

        def _parse_last_seen_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_seen_at_type_0 = datetime.datetime.fromisoformat(data)

                return last_seen_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        last_seen_at = _parse_last_seen_at(d.pop("last_seen_at", UNSET))

        def _parse_load(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        load = _parse_load(d.pop("load", UNSET))

        def _parse_max_concurrent_runs(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_concurrent_runs = _parse_max_concurrent_runs(
            d.pop("max_concurrent_runs", UNSET)
        )

        def _parse_running(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        running = _parse_running(d.pop("running", UNSET))

        def _parse_runs_started(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        runs_started = _parse_runs_started(d.pop("runs_started", UNSET))

        def _parse_share(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        share = _parse_share(d.pop("share", UNSET))

        def _parse_version(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        version = _parse_version(d.pop("version", UNSET))

        node_view = cls(
            handlers=handlers,
            id=id,
            last_seen_at=last_seen_at,
            load=load,
            max_concurrent_runs=max_concurrent_runs,
            running=running,
            runs_started=runs_started,
            share=share,
            version=version,
        )

        node_view.additional_properties = d
        return node_view

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
