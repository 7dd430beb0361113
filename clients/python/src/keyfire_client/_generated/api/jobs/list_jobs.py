from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.job_list import JobList
from ...models.list_jobs_status import ListJobsStatus
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    status: ListJobsStatus | Unset = UNSET,
    handler: str | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> dict[str, Any]:
    params: dict[str, Any] = {}

    json_status: str | Unset = UNSET
    if not isinstance(status, Unset):
        json_status = status.value

    params["status"] = json_status

    params["handler"] = handler

    params["after"] = after

    params["limit"] = limit

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/jobs",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | JobList | None:
    if response.status_code == 200:
        response_200 = JobList.from_dict(response.json())

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

    if response.status_code == 500:
        response_500 = ErrorBody.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | JobList]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    status: ListJobsStatus | Unset = UNSET,
    handler: str | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> Response[ErrorBody | JobList]:
    """List jobs, filtered by status and handler, a page at a time: jobs in id order, then the
    one-shot tasks still waiting for their firing (stored compact, listed in storage order).

    Args:
        status (ListJobsStatus | Unset):
        handler (str | Unset):
        after (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | JobList]
    """

    kwargs = _get_kwargs(
        status=status,
        handler=handler,
        after=after,
        limit=limit,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    status: ListJobsStatus | Unset = UNSET,
    handler: str | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> ErrorBody | JobList | None:
    """List jobs, filtered by status and handler, a page at a time: jobs in id order, then the
    one-shot tasks still waiting for their firing (stored compact, listed in storage order).

    Args:
        status (ListJobsStatus | Unset):
        handler (str | Unset):
        after (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | JobList
    """

    return sync_detailed(
        client=client,
        status=status,
        handler=handler,
        after=after,
        limit=limit,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    status: ListJobsStatus | Unset = UNSET,
    handler: str | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> Response[ErrorBody | JobList]:
    """List jobs, filtered by status and handler, a page at a time: jobs in id order, then the
    one-shot tasks still waiting for their firing (stored compact, listed in storage order).

    Args:
        status (ListJobsStatus | Unset):
        handler (str | Unset):
        after (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | JobList]
    """

    kwargs = _get_kwargs(
        status=status,
        handler=handler,
        after=after,
        limit=limit,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    status: ListJobsStatus | Unset = UNSET,
    handler: str | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> ErrorBody | JobList | None:
    """List jobs, filtered by status and handler, a page at a time: jobs in id order, then the
    one-shot tasks still waiting for their firing (stored compact, listed in storage order).

    Args:
        status (ListJobsStatus | Unset):
        handler (str | Unset):
        after (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | JobList
    """

    return (
        await asyncio_detailed(
            client=client,
            status=status,
            handler=handler,
            after=after,
            limit=limit,
        )
    ).parsed
