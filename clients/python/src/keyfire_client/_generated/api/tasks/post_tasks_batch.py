from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.task_batch import TaskBatch
from ...models.task_list import TaskList
from ...types import Response


def _get_kwargs(
    *,
    body: TaskBatch,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/tasks/batch",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | TaskList | None:
    if response.status_code == 201:
        response_201 = TaskList.from_dict(response.json())

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
) -> Response[ErrorBody | TaskList]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: TaskBatch,
) -> Response[ErrorBody | TaskList]:
    """Enqueue many one-shot tasks. Every task is checked before any is written: one bad task
    refuses the whole batch (422 naming `tasks[i].field`) and nothing is enqueued. As with one
    task, an id that exists already is left as it is (and listed as it is), and a task whose
    dedup key names a task enqueued within its window (an earlier one of the batch too) is
    listed as that task with `"duplicate": true`.

     With `on_complete`, the tasks are a batch: one signed callback is sent once every task has
    ended (succeeded, died, or was cancelled or deleted), with the counts (`type`
    `keyfire.batch.completed`, `webhook-id` `batch:<batch id>:completed`); `batch_id` in the
    answer reads its progress (`GET /v1/batches/{id}`). keyfire picks the tasks' ids then.

    Args:
        body (TaskBatch): Tasks to enqueue together.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | TaskList]
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
    body: TaskBatch,
) -> ErrorBody | TaskList | None:
    """Enqueue many one-shot tasks. Every task is checked before any is written: one bad task
    refuses the whole batch (422 naming `tasks[i].field`) and nothing is enqueued. As with one
    task, an id that exists already is left as it is (and listed as it is), and a task whose
    dedup key names a task enqueued within its window (an earlier one of the batch too) is
    listed as that task with `"duplicate": true`.

     With `on_complete`, the tasks are a batch: one signed callback is sent once every task has
    ended (succeeded, died, or was cancelled or deleted), with the counts (`type`
    `keyfire.batch.completed`, `webhook-id` `batch:<batch id>:completed`); `batch_id` in the
    answer reads its progress (`GET /v1/batches/{id}`). keyfire picks the tasks' ids then.

    Args:
        body (TaskBatch): Tasks to enqueue together.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | TaskList
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: TaskBatch,
) -> Response[ErrorBody | TaskList]:
    """Enqueue many one-shot tasks. Every task is checked before any is written: one bad task
    refuses the whole batch (422 naming `tasks[i].field`) and nothing is enqueued. As with one
    task, an id that exists already is left as it is (and listed as it is), and a task whose
    dedup key names a task enqueued within its window (an earlier one of the batch too) is
    listed as that task with `"duplicate": true`.

     With `on_complete`, the tasks are a batch: one signed callback is sent once every task has
    ended (succeeded, died, or was cancelled or deleted), with the counts (`type`
    `keyfire.batch.completed`, `webhook-id` `batch:<batch id>:completed`); `batch_id` in the
    answer reads its progress (`GET /v1/batches/{id}`). keyfire picks the tasks' ids then.

    Args:
        body (TaskBatch): Tasks to enqueue together.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | TaskList]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: TaskBatch,
) -> ErrorBody | TaskList | None:
    """Enqueue many one-shot tasks. Every task is checked before any is written: one bad task
    refuses the whole batch (422 naming `tasks[i].field`) and nothing is enqueued. As with one
    task, an id that exists already is left as it is (and listed as it is), and a task whose
    dedup key names a task enqueued within its window (an earlier one of the batch too) is
    listed as that task with `"duplicate": true`.

     With `on_complete`, the tasks are a batch: one signed callback is sent once every task has
    ended (succeeded, died, or was cancelled or deleted), with the counts (`type`
    `keyfire.batch.completed`, `webhook-id` `batch:<batch id>:completed`); `batch_id` in the
    answer reads its progress (`GET /v1/batches/{id}`). keyfire picks the tasks' ids then.

    Args:
        body (TaskBatch): Tasks to enqueue together.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | TaskList
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
