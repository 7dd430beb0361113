from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.popped import Popped
from ...models.reserved_view import ReservedView
from ...types import UNSET, Response, Unset


def _get_kwargs(
    topic: str,
    *,
    wait: str | Unset = UNSET,
    max_: int | Unset = UNSET,
) -> dict[str, Any]:
    params: dict[str, Any] = {}

    params["wait"] = wait

    params["max"] = max_

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/topics/{topic}/pop".format(
            topic=quote(str(topic), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | ErrorBody | Popped | ReservedView | None:
    if response.status_code == 200:

        def _parse_response_200(data: object) -> Popped | ReservedView:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_pop_answer_type_0 = ReservedView.from_dict(data)

                return componentsschemas_pop_answer_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_pop_answer_type_1 = Popped.from_dict(data)

            return componentsschemas_pop_answer_type_1

        response_200 = _parse_response_200(response.json())

        return response_200

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
) -> Response[Any | ErrorBody | Popped | ReservedView]:
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
    wait: str | Unset = UNSET,
    max_: int | Unset = UNSET,
) -> Response[Any | ErrorBody | Popped | ReservedView]:
    """Pop the oldest ready task of a topic and reserve it for its time-to-run.

     Long-polls: waits up to `wait` (at most 60 s) for a task, and answers as soon as one is
    ready; 204 when none came. Finish it with the token before its deadline, or it is handed to
    another consumer.

    Args:
        topic (str):
        wait (str | Unset):
        max_ (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody | Popped | ReservedView]
    """

    kwargs = _get_kwargs(
        topic=topic,
        wait=wait,
        max_=max_,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    topic: str,
    *,
    client: AuthenticatedClient,
    wait: str | Unset = UNSET,
    max_: int | Unset = UNSET,
) -> Any | ErrorBody | Popped | ReservedView | None:
    """Pop the oldest ready task of a topic and reserve it for its time-to-run.

     Long-polls: waits up to `wait` (at most 60 s) for a task, and answers as soon as one is
    ready; 204 when none came. Finish it with the token before its deadline, or it is handed to
    another consumer.

    Args:
        topic (str):
        wait (str | Unset):
        max_ (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody | Popped | ReservedView
    """

    return sync_detailed(
        topic=topic,
        client=client,
        wait=wait,
        max_=max_,
    ).parsed


async def asyncio_detailed(
    topic: str,
    *,
    client: AuthenticatedClient,
    wait: str | Unset = UNSET,
    max_: int | Unset = UNSET,
) -> Response[Any | ErrorBody | Popped | ReservedView]:
    """Pop the oldest ready task of a topic and reserve it for its time-to-run.

     Long-polls: waits up to `wait` (at most 60 s) for a task, and answers as soon as one is
    ready; 204 when none came. Finish it with the token before its deadline, or it is handed to
    another consumer.

    Args:
        topic (str):
        wait (str | Unset):
        max_ (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody | Popped | ReservedView]
    """

    kwargs = _get_kwargs(
        topic=topic,
        wait=wait,
        max_=max_,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    topic: str,
    *,
    client: AuthenticatedClient,
    wait: str | Unset = UNSET,
    max_: int | Unset = UNSET,
) -> Any | ErrorBody | Popped | ReservedView | None:
    """Pop the oldest ready task of a topic and reserve it for its time-to-run.

     Long-polls: waits up to `wait` (at most 60 s) for a task, and answers as soon as one is
    ready; 204 when none came. Finish it with the token before its deadline, or it is handed to
    another consumer.

    Args:
        topic (str):
        wait (str | Unset):
        max_ (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody | Popped | ReservedView
    """

    return (
        await asyncio_detailed(
            topic=topic,
            client=client,
            wait=wait,
            max_=max_,
        )
    ).parsed
