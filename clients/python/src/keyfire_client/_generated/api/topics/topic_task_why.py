from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.task_why_view import TaskWhyView
from ...types import Response


def _get_kwargs(
    topic: str,
    id: str,
) -> dict[str, Any]:
    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/topics/{topic}/tasks/{id}/why".format(
            topic=quote(str(topic), safe=""),
            id=quote(str(id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | TaskWhyView | None:
    if response.status_code == 200:
        response_200 = TaskWhyView.from_dict(response.json())

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

    if response.status_code == 404:
        response_404 = ErrorBody.from_dict(response.json())

        return response_404

    if response.status_code == 422:
        response_422 = ErrorBody.from_dict(response.json())

        return response_422

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
) -> Response[ErrorBody | TaskWhyView]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    topic: str,
    id: str,
    *,
    client: AuthenticatedClient,
) -> Response[ErrorBody | TaskWhyView]:
    """Why task `id` of `topic` is where it is: delayed until its due instant (or overdue, with
    no live node to promote it), ready and waiting for a consumer (how many before it; its
    topic paused), reserved until its deadline (delivery n of max), a dead letter (its error,
    replayable), done, or deleted.

    Args:
        topic (str):
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | TaskWhyView]
    """

    kwargs = _get_kwargs(
        topic=topic,
        id=id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    topic: str,
    id: str,
    *,
    client: AuthenticatedClient,
) -> ErrorBody | TaskWhyView | None:
    """Why task `id` of `topic` is where it is: delayed until its due instant (or overdue, with
    no live node to promote it), ready and waiting for a consumer (how many before it; its
    topic paused), reserved until its deadline (delivery n of max), a dead letter (its error,
    replayable), done, or deleted.

    Args:
        topic (str):
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | TaskWhyView
    """

    return sync_detailed(
        topic=topic,
        id=id,
        client=client,
    ).parsed


async def asyncio_detailed(
    topic: str,
    id: str,
    *,
    client: AuthenticatedClient,
) -> Response[ErrorBody | TaskWhyView]:
    """Why task `id` of `topic` is where it is: delayed until its due instant (or overdue, with
    no live node to promote it), ready and waiting for a consumer (how many before it; its
    topic paused), reserved until its deadline (delivery n of max), a dead letter (its error,
    replayable), done, or deleted.

    Args:
        topic (str):
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | TaskWhyView]
    """

    kwargs = _get_kwargs(
        topic=topic,
        id=id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    topic: str,
    id: str,
    *,
    client: AuthenticatedClient,
) -> ErrorBody | TaskWhyView | None:
    """Why task `id` of `topic` is where it is: delayed until its due instant (or overdue, with
    no live node to promote it), ready and waiting for a consumer (how many before it; its
    topic paused), reserved until its deadline (delivery n of max), a dead letter (its error,
    replayable), done, or deleted.

    Args:
        topic (str):
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | TaskWhyView
    """

    return (
        await asyncio_detailed(
            topic=topic,
            id=id,
            client=client,
        )
    ).parsed
