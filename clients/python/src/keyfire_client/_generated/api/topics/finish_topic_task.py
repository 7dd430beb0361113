from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.finish_body import FinishBody
from ...types import Response


def _get_kwargs(
    topic: str,
    id: str,
    *,
    body: FinishBody,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/topics/{topic}/tasks/{id}/finish".format(
            topic=quote(str(topic), safe=""),
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | ErrorBody | None:
    if response.status_code == 204:
        response_204 = cast(Any, None)
        return response_204

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
) -> Response[Any | ErrorBody]:
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
    body: FinishBody,
) -> Response[Any | ErrorBody]:
    """Finish (acknowledge) a reserved task with its reservation token: it is done.

     409 when the reservation is no longer this token's: it expired and the task was handed on
    (or went to the dead letters), or the token is wrong.

    Args:
        topic (str):
        id (str):
        body (FinishBody): The reservation a finish shows.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody]
    """

    kwargs = _get_kwargs(
        topic=topic,
        id=id,
        body=body,
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
    body: FinishBody,
) -> Any | ErrorBody | None:
    """Finish (acknowledge) a reserved task with its reservation token: it is done.

     409 when the reservation is no longer this token's: it expired and the task was handed on
    (or went to the dead letters), or the token is wrong.

    Args:
        topic (str):
        id (str):
        body (FinishBody): The reservation a finish shows.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody
    """

    return sync_detailed(
        topic=topic,
        id=id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    topic: str,
    id: str,
    *,
    client: AuthenticatedClient,
    body: FinishBody,
) -> Response[Any | ErrorBody]:
    """Finish (acknowledge) a reserved task with its reservation token: it is done.

     409 when the reservation is no longer this token's: it expired and the task was handed on
    (or went to the dead letters), or the token is wrong.

    Args:
        topic (str):
        id (str):
        body (FinishBody): The reservation a finish shows.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody]
    """

    kwargs = _get_kwargs(
        topic=topic,
        id=id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    topic: str,
    id: str,
    *,
    client: AuthenticatedClient,
    body: FinishBody,
) -> Any | ErrorBody | None:
    """Finish (acknowledge) a reserved task with its reservation token: it is done.

     409 when the reservation is no longer this token's: it expired and the task was handed on
    (or went to the dead letters), or the token is wrong.

    Args:
        topic (str):
        id (str):
        body (FinishBody): The reservation a finish shows.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody
    """

    return (
        await asyncio_detailed(
            topic=topic,
            id=id,
            client=client,
            body=body,
        )
    ).parsed
