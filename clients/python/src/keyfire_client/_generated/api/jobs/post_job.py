from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.job_spec_type_0 import JobSpecType0
from ...models.job_spec_type_1 import JobSpecType1
from ...models.job_spec_type_2 import JobSpecType2
from ...models.job_spec_type_3 import JobSpecType3
from ...models.job_view import JobView
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: JobSpecType0 | JobSpecType1 | JobSpecType2 | JobSpecType3,
    if_match: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(if_match, Unset):
        headers["If-Match"] = if_match

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/jobs",
    }

    if isinstance(body, JobSpecType0):
        _kwargs["json"] = body.to_dict()
    elif isinstance(body, JobSpecType1):
        _kwargs["json"] = body.to_dict()
    elif isinstance(body, JobSpecType2):
        _kwargs["json"] = body.to_dict()
    else:
        _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | JobView | None:
    if response.status_code == 200:
        response_200 = JobView.from_dict(response.json())

        return response_200

    if response.status_code == 201:
        response_201 = JobView.from_dict(response.json())

        return response_201

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorBody.from_dict(response.json())

        return response_403

    if response.status_code == 409:
        response_409 = ErrorBody.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorBody.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = ErrorBody.from_dict(response.json())

        return response_422

    if response.status_code == 500:
        response_500 = ErrorBody.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if response.status_code == 507:
        response_507 = ErrorBody.from_dict(response.json())

        return response_507

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | JobView]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: JobSpecType0 | JobSpecType1 | JobSpecType2 | JobSpecType3,
    if_match: str | Unset = UNSET,
) -> Response[ErrorBody | JobView]:
    """Create or replace a job, the id given in the body (idempotent, like `PUT /v1/jobs/{id}`).

    Args:
        if_match (str | Unset):
        body (JobSpecType0 | JobSpecType1 | JobSpecType2 | JobSpecType3): A job as a client
            declares it. Exactly one of `cron`, `every`, `at` and `after` gives the schedule (the
            others absent or null), `tz` goes only with `cron`, and `jitter` only with `cron` or
            `every` (less than `every`). `after` is resolved to `at` by Redis's clock on each write.
            `dedup` is for enqueued tasks (`POST /v1/tasks`) and refused here, except a deduplicated
            task's own declaration written back unchanged.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | JobView]
    """

    kwargs = _get_kwargs(
        body=body,
        if_match=if_match,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: JobSpecType0 | JobSpecType1 | JobSpecType2 | JobSpecType3,
    if_match: str | Unset = UNSET,
) -> ErrorBody | JobView | None:
    """Create or replace a job, the id given in the body (idempotent, like `PUT /v1/jobs/{id}`).

    Args:
        if_match (str | Unset):
        body (JobSpecType0 | JobSpecType1 | JobSpecType2 | JobSpecType3): A job as a client
            declares it. Exactly one of `cron`, `every`, `at` and `after` gives the schedule (the
            others absent or null), `tz` goes only with `cron`, and `jitter` only with `cron` or
            `every` (less than `every`). `after` is resolved to `at` by Redis's clock on each write.
            `dedup` is for enqueued tasks (`POST /v1/tasks`) and refused here, except a deduplicated
            task's own declaration written back unchanged.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | JobView
    """

    return sync_detailed(
        client=client,
        body=body,
        if_match=if_match,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: JobSpecType0 | JobSpecType1 | JobSpecType2 | JobSpecType3,
    if_match: str | Unset = UNSET,
) -> Response[ErrorBody | JobView]:
    """Create or replace a job, the id given in the body (idempotent, like `PUT /v1/jobs/{id}`).

    Args:
        if_match (str | Unset):
        body (JobSpecType0 | JobSpecType1 | JobSpecType2 | JobSpecType3): A job as a client
            declares it. Exactly one of `cron`, `every`, `at` and `after` gives the schedule (the
            others absent or null), `tz` goes only with `cron`, and `jitter` only with `cron` or
            `every` (less than `every`). `after` is resolved to `at` by Redis's clock on each write.
            `dedup` is for enqueued tasks (`POST /v1/tasks`) and refused here, except a deduplicated
            task's own declaration written back unchanged.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | JobView]
    """

    kwargs = _get_kwargs(
        body=body,
        if_match=if_match,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: JobSpecType0 | JobSpecType1 | JobSpecType2 | JobSpecType3,
    if_match: str | Unset = UNSET,
) -> ErrorBody | JobView | None:
    """Create or replace a job, the id given in the body (idempotent, like `PUT /v1/jobs/{id}`).

    Args:
        if_match (str | Unset):
        body (JobSpecType0 | JobSpecType1 | JobSpecType2 | JobSpecType3): A job as a client
            declares it. Exactly one of `cron`, `every`, `at` and `after` gives the schedule (the
            others absent or null), `tz` goes only with `cron`, and `jitter` only with `cron` or
            `every` (less than `every`). `after` is resolved to `at` by Redis's clock on each write.
            `dedup` is for enqueued tasks (`POST /v1/tasks`) and refused here, except a deduplicated
            task's own declaration written back unchanged.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | JobView
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            if_match=if_match,
        )
    ).parsed
