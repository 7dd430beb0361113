from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.added_batch import AddedBatch
from ...models.error_body import ErrorBody
from ...models.topic_batch import TopicBatch
from ...types import Response


def _get_kwargs(
    topic: str,
    *,
    body: TopicBatch,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/topics/{topic}/tasks/batch".format(
            topic=quote(str(topic), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> AddedBatch | ErrorBody | None:
    if response.status_code == 201:
        response_201 = AddedBatch.from_dict(response.json())

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
) -> Response[AddedBatch | ErrorBody]:
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
    body: TopicBatch,
) -> Response[AddedBatch | ErrorBody]:
    """Add many tasks to a topic in one call; with `on_complete`, as a batch with a completion
    callback.

     Every task is checked first: one that breaks a rule refuses the whole request (422 naming
    `tasks[i].field`) and nothing is added. Without `on_complete` each task is added as
    `POST /v1/topics/{topic}/tasks` adds it (an id that exists is left as it is). With it, keyfire
    picks the ids (all on one partition of the topic) and sends one signed callback once every
    task has ended — finished, gone to the dead letters, or deleted before it ended — queued in
    the same step that ended the last one; a dead letter replayed later leaves the batch. A
    delayed task needs a node serving the `topic` handler (409 otherwise).

    Args:
        topic (str):
        body (TopicBatch): Tasks to add to one topic.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AddedBatch | ErrorBody]
    """

    kwargs = _get_kwargs(
        topic=topic,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    topic: str,
    *,
    client: AuthenticatedClient,
    body: TopicBatch,
) -> AddedBatch | ErrorBody | None:
    """Add many tasks to a topic in one call; with `on_complete`, as a batch with a completion
    callback.

     Every task is checked first: one that breaks a rule refuses the whole request (422 naming
    `tasks[i].field`) and nothing is added. Without `on_complete` each task is added as
    `POST /v1/topics/{topic}/tasks` adds it (an id that exists is left as it is). With it, keyfire
    picks the ids (all on one partition of the topic) and sends one signed callback once every
    task has ended — finished, gone to the dead letters, or deleted before it ended — queued in
    the same step that ended the last one; a dead letter replayed later leaves the batch. A
    delayed task needs a node serving the `topic` handler (409 otherwise).

    Args:
        topic (str):
        body (TopicBatch): Tasks to add to one topic.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AddedBatch | ErrorBody
    """

    return sync_detailed(
        topic=topic,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    topic: str,
    *,
    client: AuthenticatedClient,
    body: TopicBatch,
) -> Response[AddedBatch | ErrorBody]:
    """Add many tasks to a topic in one call; with `on_complete`, as a batch with a completion
    callback.

     Every task is checked first: one that breaks a rule refuses the whole request (422 naming
    `tasks[i].field`) and nothing is added. Without `on_complete` each task is added as
    `POST /v1/topics/{topic}/tasks` adds it (an id that exists is left as it is). With it, keyfire
    picks the ids (all on one partition of the topic) and sends one signed callback once every
    task has ended — finished, gone to the dead letters, or deleted before it ended — queued in
    the same step that ended the last one; a dead letter replayed later leaves the batch. A
    delayed task needs a node serving the `topic` handler (409 otherwise).

    Args:
        topic (str):
        body (TopicBatch): Tasks to add to one topic.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AddedBatch | ErrorBody]
    """

    kwargs = _get_kwargs(
        topic=topic,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    topic: str,
    *,
    client: AuthenticatedClient,
    body: TopicBatch,
) -> AddedBatch | ErrorBody | None:
    """Add many tasks to a topic in one call; with `on_complete`, as a batch with a completion
    callback.

     Every task is checked first: one that breaks a rule refuses the whole request (422 naming
    `tasks[i].field`) and nothing is added. Without `on_complete` each task is added as
    `POST /v1/topics/{topic}/tasks` adds it (an id that exists is left as it is). With it, keyfire
    picks the ids (all on one partition of the topic) and sends one signed callback once every
    task has ended — finished, gone to the dead letters, or deleted before it ended — queued in
    the same step that ended the last one; a dead letter replayed later leaves the batch. A
    delayed task needs a node serving the `topic` handler (409 otherwise).

    Args:
        topic (str):
        body (TopicBatch): Tasks to add to one topic.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AddedBatch | ErrorBody
    """

    return (
        await asyncio_detailed(
            topic=topic,
            client=client,
            body=body,
        )
    ).parsed
