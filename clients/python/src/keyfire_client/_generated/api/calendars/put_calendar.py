from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.calendar_spec import CalendarSpec
from ...models.error_body import ErrorBody
from ...types import Response


def _get_kwargs(
    name: str,
    *,
    body: CalendarSpec,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/v1/calendars/{name}".format(
            name=quote(str(name), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> CalendarSpec | ErrorBody | None:
    if response.status_code == 200:
        response_200 = CalendarSpec.from_dict(response.json())

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
) -> Response[CalendarSpec | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    body: CalendarSpec,
) -> Response[CalendarSpec | ErrorBody]:
    """Create or replace a calendar.

     Each instant of a job that names it in `exclude` is judged by the calendar as it is when
    that instant comes: a change applies at once to every instant not yet claimed, on every
    node; an excluded instant is skipped and recorded in the job's ledger as `excluded`.

    Args:
        name (str):
        body (CalendarSpec): A calendar as a user declares it (REST, TOML, CLI, Rust) and as
            keyfire stores it.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CalendarSpec | ErrorBody]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    *,
    client: AuthenticatedClient,
    body: CalendarSpec,
) -> CalendarSpec | ErrorBody | None:
    """Create or replace a calendar.

     Each instant of a job that names it in `exclude` is judged by the calendar as it is when
    that instant comes: a change applies at once to every instant not yet claimed, on every
    node; an excluded instant is skipped and recorded in the job's ledger as `excluded`.

    Args:
        name (str):
        body (CalendarSpec): A calendar as a user declares it (REST, TOML, CLI, Rust) and as
            keyfire stores it.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CalendarSpec | ErrorBody
    """

    return sync_detailed(
        name=name,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    body: CalendarSpec,
) -> Response[CalendarSpec | ErrorBody]:
    """Create or replace a calendar.

     Each instant of a job that names it in `exclude` is judged by the calendar as it is when
    that instant comes: a change applies at once to every instant not yet claimed, on every
    node; an excluded instant is skipped and recorded in the job's ledger as `excluded`.

    Args:
        name (str):
        body (CalendarSpec): A calendar as a user declares it (REST, TOML, CLI, Rust) and as
            keyfire stores it.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CalendarSpec | ErrorBody]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    *,
    client: AuthenticatedClient,
    body: CalendarSpec,
) -> CalendarSpec | ErrorBody | None:
    """Create or replace a calendar.

     Each instant of a job that names it in `exclude` is judged by the calendar as it is when
    that instant comes: a change applies at once to every instant not yet claimed, on every
    node; an excluded instant is skipped and recorded in the job's ledger as `excluded`.

    Args:
        name (str):
        body (CalendarSpec): A calendar as a user declares it (REST, TOML, CLI, Rust) and as
            keyfire stores it.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CalendarSpec | ErrorBody
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
            body=body,
        )
    ).parsed
