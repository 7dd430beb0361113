from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.job_view import JobView
from ...models.task_spec import TaskSpec
from ...types import Response


def _get_kwargs(
    *,
    body: TaskSpec,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/tasks",
    }

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
    *,
    client: AuthenticatedClient,
    body: TaskSpec,
) -> Response[ErrorBody | JobView]:
    """Enqueue a one-shot task.

     Runs at `at`, or `after` a delay, or at once when neither is given. Without an `id`, a UUID
    is chosen. An `id` that exists already is left as it is and answered with 200 (enqueueing
    is create-if-absent, so a retried request never runs a task twice); replace a pending task
    with `PUT /v1/jobs/{id}`.

    With `dedup` (a `key`, or `content: true`, and a `window`; no `id`), a task enqueued with
    the same dedup key within its window is answered with 200 and `"duplicate": true`, and
    nothing is created; after the window a new task is created (201). `dedup.on_duplicate`
    says what the duplicate does to that task while it is pending: `keep` (default),
    `replace` (it takes this spec), `extend` (its instant moves to this one's, never earlier)
    or `replace_extend`; `deduplicated` answers what it did. Once that task was claimed, a
    `replace`/`extend` duplicate creates a new task (201).

    Args:
        body (TaskSpec): A one-shot task: a job run once, at `at`, `after` a delay, or at once
            when neither is given. Without an `id` (or with an empty or null one) keyfire picks a
            UUID; leave it out with `dedup`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | JobView]
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
    body: TaskSpec,
) -> ErrorBody | JobView | None:
    """Enqueue a one-shot task.

     Runs at `at`, or `after` a delay, or at once when neither is given. Without an `id`, a UUID
    is chosen. An `id` that exists already is left as it is and answered with 200 (enqueueing
    is create-if-absent, so a retried request never runs a task twice); replace a pending task
    with `PUT /v1/jobs/{id}`.

    With `dedup` (a `key`, or `content: true`, and a `window`; no `id`), a task enqueued with
    the same dedup key within its window is answered with 200 and `"duplicate": true`, and
    nothing is created; after the window a new task is created (201). `dedup.on_duplicate`
    says what the duplicate does to that task while it is pending: `keep` (default),
    `replace` (it takes this spec), `extend` (its instant moves to this one's, never earlier)
    or `replace_extend`; `deduplicated` answers what it did. Once that task was claimed, a
    `replace`/`extend` duplicate creates a new task (201).

    Args:
        body (TaskSpec): A one-shot task: a job run once, at `at`, `after` a delay, or at once
            when neither is given. Without an `id` (or with an empty or null one) keyfire picks a
            UUID; leave it out with `dedup`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | JobView
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: TaskSpec,
) -> Response[ErrorBody | JobView]:
    """Enqueue a one-shot task.

     Runs at `at`, or `after` a delay, or at once when neither is given. Without an `id`, a UUID
    is chosen. An `id` that exists already is left as it is and answered with 200 (enqueueing
    is create-if-absent, so a retried request never runs a task twice); replace a pending task
    with `PUT /v1/jobs/{id}`.

    With `dedup` (a `key`, or `content: true`, and a `window`; no `id`), a task enqueued with
    the same dedup key within its window is answered with 200 and `"duplicate": true`, and
    nothing is created; after the window a new task is created (201). `dedup.on_duplicate`
    says what the duplicate does to that task while it is pending: `keep` (default),
    `replace` (it takes this spec), `extend` (its instant moves to this one's, never earlier)
    or `replace_extend`; `deduplicated` answers what it did. Once that task was claimed, a
    `replace`/`extend` duplicate creates a new task (201).

    Args:
        body (TaskSpec): A one-shot task: a job run once, at `at`, `after` a delay, or at once
            when neither is given. Without an `id` (or with an empty or null one) keyfire picks a
            UUID; leave it out with `dedup`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | JobView]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: TaskSpec,
) -> ErrorBody | JobView | None:
    """Enqueue a one-shot task.

     Runs at `at`, or `after` a delay, or at once when neither is given. Without an `id`, a UUID
    is chosen. An `id` that exists already is left as it is and answered with 200 (enqueueing
    is create-if-absent, so a retried request never runs a task twice); replace a pending task
    with `PUT /v1/jobs/{id}`.

    With `dedup` (a `key`, or `content: true`, and a `window`; no `id`), a task enqueued with
    the same dedup key within its window is answered with 200 and `"duplicate": true`, and
    nothing is created; after the window a new task is created (201). `dedup.on_duplicate`
    says what the duplicate does to that task while it is pending: `keep` (default),
    `replace` (it takes this spec), `extend` (its instant moves to this one's, never earlier)
    or `replace_extend`; `deduplicated` answers what it did. Once that task was claimed, a
    `replace`/`extend` duplicate creates a new task (201).

    Args:
        body (TaskSpec): A one-shot task: a job run once, at `at`, `after` a delay, or at once
            when neither is given. Without an `id` (or with an empty or null one) keyfire picks a
            UUID; leave it out with `dedup`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | JobView
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
