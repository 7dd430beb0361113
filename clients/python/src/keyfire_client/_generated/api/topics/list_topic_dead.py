from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.topic_dead_list import TopicDeadList
from ...types import UNSET, Response, Unset


def _get_kwargs(
    topic: str,
    *,
    limit: int | Unset = UNSET,
) -> dict[str, Any]:
    params: dict[str, Any] = {}

    params["limit"] = limit

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/topics/{topic}/dead".format(
            topic=quote(str(topic), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | TopicDeadList | None:
    if response.status_code == 200:
        response_200 = TopicDeadList.from_dict(response.json())

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
) -> Response[ErrorBody | TopicDeadList]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    topic: str,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = UNSET,
) -> Response[ErrorBody | TopicDeadList]:
    """A topic's dead letters (tasks delivered `max_deliveries` times without a finish), newest
    first, each with its deliveries, when it died and why.

    Args:
        topic (str):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | TopicDeadList]
    """

    kwargs = _get_kwargs(
        topic=topic,
        limit=limit,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    topic: str,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = UNSET,
) -> ErrorBody | TopicDeadList | None:
    """A topic's dead letters (tasks delivered `max_deliveries` times without a finish), newest
    first, each with its deliveries, when it died and why.

    Args:
        topic (str):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | TopicDeadList
    """

    return sync_detailed(
        topic=topic,
        client=client,
        limit=limit,
    ).parsed


async def asyncio_detailed(
    topic: str,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = UNSET,
) -> Response[ErrorBody | TopicDeadList]:
    """A topic's dead letters (tasks delivered `max_deliveries` times without a finish), newest
    first, each with its deliveries, when it died and why.

    Args:
        topic (str):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | TopicDeadList]
    """

    kwargs = _get_kwargs(
        topic=topic,
        limit=limit,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    topic: str,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = UNSET,
) -> ErrorBody | TopicDeadList | None:
    """A topic's dead letters (tasks delivered `max_deliveries` times without a finish), newest
    first, each with its deliveries, when it died and why.

    Args:
        topic (str):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | TopicDeadList
    """

    return (
        await asyncio_detailed(
            topic=topic,
            client=client,
            limit=limit,
        )
    ).parsed
