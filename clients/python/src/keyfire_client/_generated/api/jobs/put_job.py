from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.job_spec_without_id_type_0 import JobSpecWithoutIdType0
from ...models.job_spec_without_id_type_1 import JobSpecWithoutIdType1
from ...models.job_spec_without_id_type_2 import JobSpecWithoutIdType2
from ...models.job_spec_without_id_type_3 import JobSpecWithoutIdType3
from ...models.job_view import JobView
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: str,
    *,
    body: JobSpecWithoutIdType0
    | JobSpecWithoutIdType1
    | JobSpecWithoutIdType2
    | JobSpecWithoutIdType3,
    if_match: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(if_match, Unset):
        headers["If-Match"] = if_match

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/v1/jobs/{id}".format(
            id=quote(str(id), safe=""),
        ),
    }

    if isinstance(body, JobSpecWithoutIdType0):
        _kwargs["json"] = body.to_dict()
    elif isinstance(body, JobSpecWithoutIdType1):
        _kwargs["json"] = body.to_dict()
    elif isinstance(body, JobSpecWithoutIdType2):
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
    id: str,
    *,
    client: AuthenticatedClient,
    body: JobSpecWithoutIdType0
    | JobSpecWithoutIdType1
    | JobSpecWithoutIdType2
    | JobSpecWithoutIdType3,
    if_match: str | Unset = UNSET,
) -> Response[ErrorBody | JobView]:
    """Create or replace the job with this id (idempotent).

     The body is a job spec; its `id` may be left out, and must match the path when given.
    With `If-Match: "<version>"` the job is replaced only if it is still at that version
    (`"0"`: only if it does not exist yet), else 409. Sending the spec the job already has
    changes nothing and keeps its version (200); `after` is resolved against the clock on
    each write, so re-sending an `after` sets a new instant.

    Args:
        id (str):
        if_match (str | Unset):
        body (JobSpecWithoutIdType0 | JobSpecWithoutIdType1 | JobSpecWithoutIdType2 |
            JobSpecWithoutIdType3): A job spec without its id: `PUT /v1/jobs/{id}` takes the id from
            its path (an `id` in the body equal to the path's is let through; another is refused with
            422).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | JobView]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
        if_match=if_match,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: str,
    *,
    client: AuthenticatedClient,
    body: JobSpecWithoutIdType0
    | JobSpecWithoutIdType1
    | JobSpecWithoutIdType2
    | JobSpecWithoutIdType3,
    if_match: str | Unset = UNSET,
) -> ErrorBody | JobView | None:
    """Create or replace the job with this id (idempotent).

     The body is a job spec; its `id` may be left out, and must match the path when given.
    With `If-Match: "<version>"` the job is replaced only if it is still at that version
    (`"0"`: only if it does not exist yet), else 409. Sending the spec the job already has
    changes nothing and keeps its version (200); `after` is resolved against the clock on
    each write, so re-sending an `after` sets a new instant.

    Args:
        id (str):
        if_match (str | Unset):
        body (JobSpecWithoutIdType0 | JobSpecWithoutIdType1 | JobSpecWithoutIdType2 |
            JobSpecWithoutIdType3): A job spec without its id: `PUT /v1/jobs/{id}` takes the id from
            its path (an `id` in the body equal to the path's is let through; another is refused with
            422).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | JobView
    """

    return sync_detailed(
        id=id,
        client=client,
        body=body,
        if_match=if_match,
    ).parsed


async def asyncio_detailed(
    id: str,
    *,
    client: AuthenticatedClient,
    body: JobSpecWithoutIdType0
    | JobSpecWithoutIdType1
    | JobSpecWithoutIdType2
    | JobSpecWithoutIdType3,
    if_match: str | Unset = UNSET,
) -> Response[ErrorBody | JobView]:
    """Create or replace the job with this id (idempotent).

     The body is a job spec; its `id` may be left out, and must match the path when given.
    With `If-Match: "<version>"` the job is replaced only if it is still at that version
    (`"0"`: only if it does not exist yet), else 409. Sending the spec the job already has
    changes nothing and keeps its version (200); `after` is resolved against the clock on
    each write, so re-sending an `after` sets a new instant.

    Args:
        id (str):
        if_match (str | Unset):
        body (JobSpecWithoutIdType0 | JobSpecWithoutIdType1 | JobSpecWithoutIdType2 |
            JobSpecWithoutIdType3): A job spec without its id: `PUT /v1/jobs/{id}` takes the id from
            its path (an `id` in the body equal to the path's is let through; another is refused with
            422).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | JobView]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
        if_match=if_match,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    *,
    client: AuthenticatedClient,
    body: JobSpecWithoutIdType0
    | JobSpecWithoutIdType1
    | JobSpecWithoutIdType2
    | JobSpecWithoutIdType3,
    if_match: str | Unset = UNSET,
) -> ErrorBody | JobView | None:
    """Create or replace the job with this id (idempotent).

     The body is a job spec; its `id` may be left out, and must match the path when given.
    With `If-Match: "<version>"` the job is replaced only if it is still at that version
    (`"0"`: only if it does not exist yet), else 409. Sending the spec the job already has
    changes nothing and keeps its version (200); `after` is resolved against the clock on
    each write, so re-sending an `after` sets a new instant.

    Args:
        id (str):
        if_match (str | Unset):
        body (JobSpecWithoutIdType0 | JobSpecWithoutIdType1 | JobSpecWithoutIdType2 |
            JobSpecWithoutIdType3): A job spec without its id: `PUT /v1/jobs/{id}` takes the id from
            its path (an `id` in the body equal to the path's is let through; another is refused with
            422).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | JobView
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
            if_match=if_match,
        )
    ).parsed
