from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.bulk_changed import BulkChanged
from ...models.error_body import ErrorBody
from ...models.job_selection import JobSelection
from ...types import Response


def _get_kwargs(
    *,
    body: JobSelection,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/jobs:pause",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> BulkChanged | ErrorBody | None:
    if response.status_code == 200:
        response_200 = BulkChanged.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorBody.from_dict(response.json())

        return response_403

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
) -> Response[BulkChanged | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: JobSelection,
) -> Response[BulkChanged | ErrorBody]:
    """Pause every active job picked by `handler` or by `id_prefix` (exactly one).

     Reads the whole job index, a page at a time, and pauses each match as
    `POST /v1/jobs/{id}/pause` would; a job created meanwhile may be missed.

    Args:
        body (JobSelection): Which jobs to act on: exactly one of `handler` and `id_prefix`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BulkChanged | ErrorBody]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: JobSelection,
) -> BulkChanged | ErrorBody | None:
    """Pause every active job picked by `handler` or by `id_prefix` (exactly one).

     Reads the whole job index, a page at a time, and pauses each match as
    `POST /v1/jobs/{id}/pause` would; a job created meanwhile may be missed.

    Args:
        body (JobSelection): Which jobs to act on: exactly one of `handler` and `id_prefix`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BulkChanged | ErrorBody
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: JobSelection,
) -> Response[BulkChanged | ErrorBody]:
    """Pause every active job picked by `handler` or by `id_prefix` (exactly one).

     Reads the whole job index, a page at a time, and pauses each match as
    `POST /v1/jobs/{id}/pause` would; a job created meanwhile may be missed.

    Args:
        body (JobSelection): Which jobs to act on: exactly one of `handler` and `id_prefix`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BulkChanged | ErrorBody]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: JobSelection,
) -> BulkChanged | ErrorBody | None:
    """Pause every active job picked by `handler` or by `id_prefix` (exactly one).

     Reads the whole job index, a page at a time, and pauses each match as
    `POST /v1/jobs/{id}/pause` would; a job created meanwhile may be missed.

    Args:
        body (JobSelection): Which jobs to act on: exactly one of `handler` and `id_prefix`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BulkChanged | ErrorBody
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
