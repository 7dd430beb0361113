from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.backfill_request import BackfillRequest
from ...models.backfill_view import BackfillView
from ...models.error_body import ErrorBody
from ...types import Response


def _get_kwargs(
    id: str,
    *,
    body: BackfillRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/jobs/{id}/backfill".format(
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> BackfillView | ErrorBody | None:
    if response.status_code == 202:
        response_202 = BackfillView.from_dict(response.json())

        return response_202

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorBody.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = ErrorBody.from_dict(response.json())

        return response_404

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
) -> Response[BackfillView | ErrorBody]:
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
    body: BackfillRequest,
) -> Response[BackfillView | ErrorBody]:
    """Run each instant of the job's schedule from `from` to `to` once, each as a firing of its
    own (its id names the instant), at `rate` runs per second.

     Instants a firing ran, runs or waits for already are skipped (the run history, dead
    letters, runs in progress, queued attempts, earlier backfills; from the job's creation to
    its last firing, what its ledger does not name as skipped), so sending the same backfill
    again queues nothing. The runs wait in Redis as queued attempts: any node runs them.

    Args:
        id (str):
        body (BackfillRequest): The range to backfill, and how fast.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BackfillView | ErrorBody]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: str,
    *,
    client: AuthenticatedClient,
    body: BackfillRequest,
) -> BackfillView | ErrorBody | None:
    """Run each instant of the job's schedule from `from` to `to` once, each as a firing of its
    own (its id names the instant), at `rate` runs per second.

     Instants a firing ran, runs or waits for already are skipped (the run history, dead
    letters, runs in progress, queued attempts, earlier backfills; from the job's creation to
    its last firing, what its ledger does not name as skipped), so sending the same backfill
    again queues nothing. The runs wait in Redis as queued attempts: any node runs them.

    Args:
        id (str):
        body (BackfillRequest): The range to backfill, and how fast.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BackfillView | ErrorBody
    """

    return sync_detailed(
        id=id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    id: str,
    *,
    client: AuthenticatedClient,
    body: BackfillRequest,
) -> Response[BackfillView | ErrorBody]:
    """Run each instant of the job's schedule from `from` to `to` once, each as a firing of its
    own (its id names the instant), at `rate` runs per second.

     Instants a firing ran, runs or waits for already are skipped (the run history, dead
    letters, runs in progress, queued attempts, earlier backfills; from the job's creation to
    its last firing, what its ledger does not name as skipped), so sending the same backfill
    again queues nothing. The runs wait in Redis as queued attempts: any node runs them.

    Args:
        id (str):
        body (BackfillRequest): The range to backfill, and how fast.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BackfillView | ErrorBody]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    *,
    client: AuthenticatedClient,
    body: BackfillRequest,
) -> BackfillView | ErrorBody | None:
    """Run each instant of the job's schedule from `from` to `to` once, each as a firing of its
    own (its id names the instant), at `rate` runs per second.

     Instants a firing ran, runs or waits for already are skipped (the run history, dead
    letters, runs in progress, queued attempts, earlier backfills; from the job's creation to
    its last firing, what its ledger does not name as skipped), so sending the same backfill
    again queues nothing. The runs wait in Redis as queued attempts: any node runs them.

    Args:
        id (str):
        body (BackfillRequest): The range to backfill, and how fast.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BackfillView | ErrorBody
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
