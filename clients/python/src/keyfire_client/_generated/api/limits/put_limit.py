from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.limit_spec import LimitSpec
from ...models.limit_view import LimitView
from ...types import Response


def _get_kwargs(
    key: str,
    *,
    body: LimitSpec,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/v1/limits/{key}".format(
            key=quote(str(key), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | LimitView | None:
    if response.status_code == 200:
        response_200 = LimitView.from_dict(response.json())

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
) -> Response[ErrorBody | LimitView]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    key: str,
    *,
    client: AuthenticatedClient,
    body: LimitSpec,
) -> Response[ErrorBody | LimitView]:
    """Set (create or replace) the limit of a key.

     `rate`: most firings started per second; `in_flight`: most running at once; give one or
    both, neither 0. The key is `host:<host>` for an `http` target, or the `limit_key` jobs
    name. Every node applies it at once.

    Args:
        key (str):
        body (LimitSpec): A limit shared by the whole cluster: at most `rate` firings of the key
            start in any one
            second, and at most `in_flight` run at once. At least one of the two is given; neither
            may be 0. A firing held back by its limit is delayed (same attempt, not a failure), in
            the order of its scheduled instant.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | LimitView]
    """

    kwargs = _get_kwargs(
        key=key,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    key: str,
    *,
    client: AuthenticatedClient,
    body: LimitSpec,
) -> ErrorBody | LimitView | None:
    """Set (create or replace) the limit of a key.

     `rate`: most firings started per second; `in_flight`: most running at once; give one or
    both, neither 0. The key is `host:<host>` for an `http` target, or the `limit_key` jobs
    name. Every node applies it at once.

    Args:
        key (str):
        body (LimitSpec): A limit shared by the whole cluster: at most `rate` firings of the key
            start in any one
            second, and at most `in_flight` run at once. At least one of the two is given; neither
            may be 0. A firing held back by its limit is delayed (same attempt, not a failure), in
            the order of its scheduled instant.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | LimitView
    """

    return sync_detailed(
        key=key,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    key: str,
    *,
    client: AuthenticatedClient,
    body: LimitSpec,
) -> Response[ErrorBody | LimitView]:
    """Set (create or replace) the limit of a key.

     `rate`: most firings started per second; `in_flight`: most running at once; give one or
    both, neither 0. The key is `host:<host>` for an `http` target, or the `limit_key` jobs
    name. Every node applies it at once.

    Args:
        key (str):
        body (LimitSpec): A limit shared by the whole cluster: at most `rate` firings of the key
            start in any one
            second, and at most `in_flight` run at once. At least one of the two is given; neither
            may be 0. A firing held back by its limit is delayed (same attempt, not a failure), in
            the order of its scheduled instant.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | LimitView]
    """

    kwargs = _get_kwargs(
        key=key,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    key: str,
    *,
    client: AuthenticatedClient,
    body: LimitSpec,
) -> ErrorBody | LimitView | None:
    """Set (create or replace) the limit of a key.

     `rate`: most firings started per second; `in_flight`: most running at once; give one or
    both, neither 0. The key is `host:<host>` for an `http` target, or the `limit_key` jobs
    name. Every node applies it at once.

    Args:
        key (str):
        body (LimitSpec): A limit shared by the whole cluster: at most `rate` firings of the key
            start in any one
            second, and at most `in_flight` run at once. At least one of the two is given; neither
            may be 0. A firing held back by its limit is delayed (same attempt, not a failure), in
            the order of its scheduled instant.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | LimitView
    """

    return (
        await asyncio_detailed(
            key=key,
            client=client,
            body=body,
        )
    ).parsed
