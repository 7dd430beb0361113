/**
 * Typed errors: every error answer of the API is `{"error": {"code", "message", "field"}}`.
 *
 * `KeyfireError` carries the three, plus the HTTP status; a subclass per kind of failure lets
 * callers catch what they can act on:
 *
 * - `InvalidError`: bad input, named in `field` (422 `invalid`; 400 `malformed_json`,
 *   `bad_query`, `bad_path`, `bad_request`; 413; 415);
 * - `NotFoundError` (404), `ConflictError` (409: changed concurrently, not at the `If-Match`
 *   version, a reservation lost, nothing to cancel);
 * - `UnauthorizedError` (401: missing or wrong token; 403 `forbidden`);
 * - `UnavailableError` (503: Redis is away; 502 and 504 from a proxy) and its subclasses
 *   `UnreachableError` (no answer at all) and `RedisFullError` (507: Redis reached its
 *   `maxmemory` and refuses writes). All are worth retrying; the consumer does, with backoff,
 *   waiting at least the answer's `Retry-After` (`retryAfter`).
 */

/** The API's error codes (`ErrorDetail.code`), plus `unreachable` for no answer. */
export const ErrorCode = {
  MalformedJson: "malformed_json",
  BadQuery: "bad_query",
  BadPath: "bad_path",
  BadRequest: "bad_request",
  Unauthorized: "unauthorized",
  Forbidden: "forbidden",
  NotFound: "not_found",
  MethodNotAllowed: "method_not_allowed",
  Conflict: "conflict",
  NothingToCancel: "nothing_to_cancel",
  PayloadTooLarge: "payload_too_large",
  UnsupportedMediaType: "unsupported_media_type",
  Invalid: "invalid",
  Internal: "internal",
  Unavailable: "unavailable",
  RedisFull: "redis_full",
  Unreachable: "unreachable",
} as const;

/** One of `ErrorCode`'s values, or a code this client does not know yet. */
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode] | (string & {});

/**
 * An error answer of the API (or no answer: see `UnreachableError`). `code` is the API's
 * stable code, `message` says what went wrong in words a person can act on, `field` names the
 * input at fault (`cron`, `tasks[2].at`, `wait`) or is null; `status` is the HTTP status
 * (null when no answer came); `retryAfter` the seconds of the answer's `Retry-After` header,
 * when it had one.
 */
export class KeyfireError extends Error {
  readonly code: ErrorCode;
  readonly field: string | null;
  readonly status: number | null;
  readonly retryAfter: number | null;

  constructor(code: ErrorCode, message: string, field: string | null = null, status: number | null = null, retryAfter: number | null = null) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.field = field;
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

/** Bad input; `field` names it. Nothing was written. */
export class InvalidError extends KeyfireError {}
/** No such job, task, topic task or limit. */
export class NotFoundError extends KeyfireError {}
/** Changed concurrently, not at the `If-Match` version, or a reservation lost. */
export class ConflictError extends KeyfireError {}
/** Missing or wrong bearer token (401), or a request the node refuses to serve (403). */
export class UnauthorizedError extends KeyfireError {}
/** The node answered that it cannot serve now (503: Redis is away); try again later. */
export class UnavailableError extends KeyfireError {}
/** No answer from the node: connection refused or reset. */
export class UnreachableError extends UnavailableError {}
/**
 * Redis reached its `maxmemory` and refuses writes (507); nothing was written. Memory comes
 * back as consumers finish tasks and records expire: retry after `retryAfter` seconds.
 */
export class RedisFullError extends UnavailableError {}

type ErrorClass = new (code: ErrorCode, message: string, field: string | null, status: number | null, retryAfter: number | null) => KeyfireError;

const BY_CODE: Record<string, ErrorClass> = {
  invalid: InvalidError,
  malformed_json: InvalidError,
  bad_query: InvalidError,
  bad_path: InvalidError,
  bad_request: InvalidError,
  payload_too_large: InvalidError,
  unsupported_media_type: InvalidError,
  not_found: NotFoundError,
  conflict: ConflictError,
  unauthorized: UnauthorizedError,
  forbidden: UnauthorizedError,
  unavailable: UnavailableError,
  redis_full: RedisFullError,
};

const BY_STATUS: Record<number, ErrorClass> = {
  400: InvalidError,
  401: UnauthorizedError,
  403: UnauthorizedError,
  404: NotFoundError,
  409: ConflictError,
  413: InvalidError,
  415: InvalidError,
  422: InvalidError,
  502: UnavailableError,
  503: UnavailableError,
  504: UnavailableError,
  507: RedisFullError,
};

/**
 * The typed error of an answer with a non-2xx `status`; `body` is what openapi-fetch parsed,
 * `headers` the answer's.
 */
export function errorFromResponse(status: number, body: unknown, headers?: Headers): KeyfireError {
  const detail = (body as { error?: { code?: unknown; message?: unknown; field?: unknown } } | undefined)?.error;
  let code = typeof detail?.code === "string" ? detail.code : undefined;
  if (code === undefined) {
    code = status === 502 || status === 503 || status === 504 ? "unavailable" : `http_${status}`;
  }
  let message = typeof detail?.message === "string" ? detail.message : undefined;
  if (message === undefined) {
    const text = typeof body === "string" ? body.slice(0, 200).trim() : "";
    message = `HTTP ${status}${text ? `: ${text}` : ""}`;
  }
  const field = typeof detail?.field === "string" ? detail.field : null;
  // Seconds only; an HTTP date leaves the decision to the backoff.
  const retryAfterText = headers?.get("retry-after");
  const retryAfter = retryAfterText && /^\d+(\.\d+)?$/.test(retryAfterText.trim()) ? Number(retryAfterText) : null;
  const Class = BY_CODE[code] ?? BY_STATUS[status] ?? KeyfireError;
  return new Class(code, message, field, status, retryAfter);
}

/** The error for a request that got no answer. */
export function unreachable(baseUrl: string, cause: unknown): UnreachableError {
  const why = cause instanceof Error ? `${cause.message}${cause.cause instanceof Error ? `: ${cause.cause.message}` : ""}` : String(cause);
  const err = new UnreachableError("unreachable", `no answer from ${baseUrl}: ${why}`);
  (err as { cause?: unknown }).cause = cause;
  return err;
}
