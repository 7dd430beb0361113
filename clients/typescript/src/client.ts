/**
 * `Keyfire`: the hand-written layer over openapi-fetch and the types openapi-typescript
 * generated from the node's OpenAPI document (`./generated/schema.ts`).
 *
 * Every call is an openapi-fetch call typed by that document; this layer turns error answers
 * into typed exceptions (`./errors.ts`) and adds what the document cannot say: the delay
 * queue's reserved tasks with `touch`, and `If-Match` versions as numbers. For routes it does
 * not wrap (limits, dead letters, nodes), use `keyfire.api` directly:
 *
 *     const { data } = await keyfire.api.GET("/v1/limits");
 */

import createClient, { type Client as FetchClient } from "openapi-fetch";

import { errorFromResponse, unreachable, UnavailableError } from "./errors.js";
import type { components, paths } from "./generated/schema.js";
import { Consumer, type ConsumerOptions, type Handler } from "./consumer.js";

type Schemas = components["schemas"];
/** A job as declared (exactly one of `cron`, `every`, `at`, `after`). */
export type JobSpec = Schemas["JobSpec"];
/** A job as the API shows it: spec, state, `version`, next firings. */
export type JobView = Schemas["JobView"];
/** What a cancel did: the running firings told to stop, and those cancelled before they ran. */
export type CancelView = Schemas["CancelView"];
/**
 * A one-shot task to enqueue (with `dedup` for deduplication). Its `id` is optional: the node
 * picks one when it is left out (and must, with `dedup`).
 */
export type TaskSpec = Schemas["TaskSpec"];
/** Tasks enqueued together, in the order given; `batch_id` with `onComplete` (`getBatch`). */
export type TaskList = Schemas["TaskList"];
/** Where a batch's completion callback goes: `url`, and `signing_secrets` (default: the host's). */
export type OnComplete = Schemas["OnComplete"];
/**
 * A batch's progress: `total`, `succeeded`, `died`, `cancelled`, `pending`, `created_ms`, and
 * `completed_ms` once its last task ended (its callback was queued then).
 */
export type BatchStatus = Schemas["BatchStatus"];
/** A topic task's state and deliveries. */
export type TaskView = Schemas["TaskView"];
/** Every topic with its tasks by state. */
export type TopicList = Schemas["TopicList"];
/** A topic's settings. */
export type TopicView = Schemas["TopicView"];
/** Which jobs a bulk pause or resume picks: exactly one of `handler` and `id_prefix`. */
export type JobSelection = { handler: string; id_prefix?: never } | { id_prefix: string; handler?: never };
/** What a bulk pause or resume did: jobs picked, and those this call changed. */
export type BulkChanged = Schemas["BulkChanged"];
export type BackfillView = Schemas["BackfillView"];
/** A job's runs, and with `skipped` its timeline of runs and skips. */
export type RunList = Schemas["RunList"];
/** Why a job runs or does not: `state`, `causes`, `summary`, next firing, recent runs and skips. */
export type WhyView = Schemas["WhyView"];
export type TaskWhyView = Schemas["TaskWhyView"];
/** A dead letter of a topic: its deliveries, when it died (`died_at`) and why (`error`). */
export type TopicDeadLetter = Schemas["TopicDeadLetter"];
/** A topic's paused state after a pause or resume. */
export type TopicPaused = Schemas["TopicPaused"];
/** How a finish answered one task: `done`, `lost` or `not_found`. */
export type FinishOutcome = "done" | "lost" | "not_found" | (string & {});

export interface KeyfireOptions {
  /** The node's API, such as `http://127.0.0.1:8080` (the default). */
  baseUrl?: string;
  /** The node's `api.token`, sent as `Authorization: Bearer`. */
  token?: string;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
  /** A `fetch` of your own (the global one by default). */
  fetch?: typeof globalThis.fetch;
}

export interface AddOptions {
  /** Ready after this delay (`"30s"`); at once when neither `delay` nor `at` is given. */
  delay?: string;
  /** Ready at this instant (RFC 3339, or a Date). */
  at?: string | Date;
  /** How long a consumer may hold it before it is handed to another (default `"60s"`). */
  ttr?: string;
  /** Deliveries before it goes to the topic's dead letters (default 5). */
  maxDeliveries?: number;
  /** Its id: an add with an id that exists is left as it is (idempotent). */
  id?: string;
  /** Its priority, 0 (default) to 9: pops take the highest ready first. */
  priority?: number;
  /**
   * Deduplicate by a key within a window (no `id`); `on_duplicate` (`keep`, `replace`,
   * `extend`, `replace_extend`) says what a duplicate does to the pending task (debounce).
   */
  dedup?: Schemas["DedupSpec"];
}

export interface PopOptions {
  /** Up to this many tasks, 1 to 1000 (default 1). */
  max?: number;
  /** How long to wait for the first (`"10s"`, at most `"60s"`; default `"0s"`). */
  wait?: string;
}

export interface EnqueueBatchOptions {
  /**
   * Make the tasks a batch whose end sends one signed POST with the counts: a URL, or
   * `{ url, signing_secrets }`. keyfire picks the tasks' ids then (a task names no `id`,
   * `dedup` or `after_task`).
   */
  onComplete?: string | OnComplete;
}

/** The answer to `enqueue`: the task as stored, and whether this call created it. */
export interface Enqueued {
  job: JobView;
  /** This call created the task (201). */
  created: boolean;
  /** Its dedup key was enqueued within the window: this is the task created then. */
  duplicate: boolean;
}

/**
 * A task popped from a topic, reserved to this consumer until `deadline`. `token` is the
 * reservation `finish` and `touch` must show; `deliveries` counts this delivery (2 or more: an
 * earlier consumer did not finish it within its time-to-run).
 */
export class Task<P = unknown> {
  readonly id: string;
  readonly topic: string;
  readonly payload: P;
  readonly deliveries: number;
  readonly token: string;
  readonly ttr: string;
  readonly dueAt: Date;
  readonly readyAt: Date;
  readonly reservedAt: Date;
  deadline: Date;
  readonly #keyfire: Keyfire;

  /** @internal */
  constructor(keyfire: Keyfire, raw: Record<string, unknown>) {
    this.#keyfire = keyfire;
    this.id = raw.id as string;
    this.topic = raw.topic as string;
    this.payload = raw.payload as P;
    this.deliveries = raw.deliveries as number;
    this.token = raw.token as string;
    this.ttr = raw.ttr as string;
    this.dueAt = new Date(raw.due_at as string);
    this.readyAt = new Date(raw.ready_at as string);
    this.reservedAt = new Date(raw.reserved_at as string);
    this.deadline = new Date(raw.deadline as string);
  }

  /**
   * Extend the reservation to now plus `ttr` (default: the task's own); resolves to the new
   * deadline. `ConflictError` when the reservation was lost.
   */
  async touch(ttr?: string): Promise<Date> {
    this.deadline = await this.#keyfire.touch(this.topic, this.id, this.token, { ttr });
    return this.deadline;
  }

  /** Acknowledge this task alone: `done`, `lost` or `not_found`. */
  async finish(): Promise<FinishOutcome> {
    const outcomes = await this.#keyfire.finish(this.topic, [this]);
    return outcomes[this.id] ?? "not_found";
  }

  /**
   * Run `work` while touching the reservation every `everyMs` (default a third of the
   * time-to-run), so work longer than the time-to-run keeps the task.
   */
  async keepAlive<T>(work: () => Promise<T>, everyMs?: number): Promise<T> {
    const every = everyMs ?? Math.max(50, (this.deadline.getTime() - this.reservedAt.getTime()) / 3);
    let lost = false;
    const timer = setInterval(() => {
      if (lost) return;
      this.touch().catch((err: unknown) => {
        // Unavailable: the next beat may get through before the deadline. Anything else (the
        // reservation lost, the task deleted): touching again cannot bring it back.
        if (!(err instanceof UnavailableError)) lost = true;
      });
    }, every);
    try {
      return await work();
    } finally {
      clearInterval(timer);
    }
  }
}

type FetchResult<T> = { data?: T; error?: unknown; response: Response };

/**
 * A client of one keyfire node's REST API.
 *
 *     const keyfire = new Keyfire({ baseUrl: "http://127.0.0.1:8080", token: process.env.KEYFIRE_TOKEN });
 *     const id = await keyfire.add("orders", { order: 7 }, { delay: "30s" });
 *     for (const task of await keyfire.pop("orders", { max: 100, wait: "10s" })) { ... }
 */
export class Keyfire {
  /** The generated, typed openapi-fetch client: every route of the document. */
  readonly api: FetchClient<paths>;
  readonly baseUrl: string;

  constructor(options: KeyfireOptions = {}) {
    this.baseUrl = (options.baseUrl ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
    const headers: Record<string, string> = { ...options.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    this.api = createClient<paths>({ baseUrl: this.baseUrl, headers, fetch: options.fetch });
  }

  /** Await an openapi-fetch call: its 2xx answer, or a typed error. */
  private async call<T>(request: Promise<FetchResult<T>>): Promise<{ data: T; response: Response }> {
    let result: FetchResult<T>;
    try {
      result = await request;
    } catch (err) {
      // fetch rejects with a TypeError when no answer came (refused, reset, DNS).
      if (err instanceof TypeError) throw unreachable(this.baseUrl, err);
      throw err;
    }
    if (!result.response.ok) throw errorFromResponse(result.response.status, result.error, result.response.headers);
    return { data: result.data as T, response: result.response };
  }

  // --- the delay queue -------------------------------------------------------------------

  /**
   * Add a task to `topic`, ready after `delay`, at `at`, or at once; resolves to its id. With
   * `id`, the add is idempotent: an id that exists is left as it is, so a retried add adds
   * nothing. With `dedup`, resolves to the id of the task its key names when this add was a
   * duplicate (see `addWithOutcome` for what it did).
   */
  async add(topic: string, payload: unknown, options: AddOptions = {}): Promise<string> {
    const at = options.at instanceof Date ? options.at.toISOString() : options.at;
    const { data } = await this.call(
      this.api.POST("/v1/topics/{topic}/tasks", {
        params: { path: { topic } },
        body: {
          payload,
          delay: options.delay,
          at,
          ttr: options.ttr,
          max_deliveries: options.maxDeliveries,
          id: options.id,
          priority: options.priority,
          dedup: options.dedup,
        },
      }),
    );
    return data.id;
  }

  /**
   * Add 1 to 1000 tasks to `topic` in one call (each as `POST /v1/topics/{topic}/tasks` takes
   * it); resolves to their ids. With `onComplete`, the tasks are a batch: one signed POST with
   * the counts once every one was finished, dead-lettered or deleted, and the answer's
   * `batch_id` reads its progress (`getBatch`); keyfire then picks the tasks' ids, on one
   * partition.
   */
  async addBatch(
    topic: string,
    tasks: readonly Schemas["AddTask"][],
    options: EnqueueBatchOptions = {},
  ): Promise<Schemas["AddedBatch"]> {
    const onComplete = typeof options.onComplete === "string" ? { url: options.onComplete } : options.onComplete;
    const { data } = await this.call(
      this.api.POST("/v1/topics/{topic}/tasks/batch", {
        params: { path: { topic } },
        body: { tasks: [...tasks], on_complete: onComplete },
      }),
    );
    return data;
  }

  /**
   * `add`, resolving to the whole answer: the id, and for a duplicate (`dedup`) what it did to
   * the task its key names (`deduplicated`: `kept`, `replaced`, `extended`, `replaced_extended`).
   */
  async addWithOutcome(topic: string, payload: unknown, options: AddOptions = {}): Promise<Schemas["Added"]> {
    const at = options.at instanceof Date ? options.at.toISOString() : options.at;
    const { data } = await this.call(
      this.api.POST("/v1/topics/{topic}/tasks", {
        params: { path: { topic } },
        body: {
          payload,
          delay: options.delay,
          at,
          ttr: options.ttr,
          max_deliveries: options.maxDeliveries,
          id: options.id,
          priority: options.priority,
          dedup: options.dedup,
        },
      }),
    );
    return data;
  }

  /**
   * Reserve up to `max` ready tasks of `topic`, waiting up to `wait` for the first; an empty
   * list when none came.
   */
  async pop<P = unknown>(topic: string, options: PopOptions = {}): Promise<Task<P>[]> {
    const { data, response } = await this.call(
      this.api.POST("/v1/topics/{topic}/pop", {
        params: { path: { topic }, query: { max: options.max ?? 1, wait: options.wait ?? "0s" } },
      }),
    );
    if (response.status === 204 || data === undefined) return [];
    // A pop with `max` answers `{"tasks": [...]}`; read either shape.
    const body = data as unknown as { tasks?: Record<string, unknown>[] } & Record<string, unknown>;
    const items = Array.isArray(body.tasks) ? body.tasks : [body];
    return items.map((raw) => new Task<P>(this, raw));
  }

  /**
   * Acknowledge reserved tasks (`Task`s, or `{id, token}`) in one call; resolves to each id's
   * outcome: `done` (also when done already under this token), `lost` (the reservation
   * expired and the task went back to the topic; it will run again) or `not_found`.
   */
  async finish(topic: string, tasks: ReadonlyArray<{ id: string; token: string }>): Promise<Record<string, FinishOutcome>> {
    if (tasks.length === 0) return {};
    const { data } = await this.call(
      this.api.POST("/v1/topics/{topic}/finish", {
        params: { path: { topic } },
        body: { tasks: tasks.map(({ id, token }) => ({ id, token })) },
      }),
    );
    return Object.fromEntries(data.results.map((r) => [r.id, r.outcome]));
  }

  /** Extend a reservation to now plus `ttr` (default: the task's own); the new deadline. */
  async touch(topic: string, id: string, token: string, options: { ttr?: string } = {}): Promise<Date> {
    const { data } = await this.call(
      this.api.POST("/v1/topics/{topic}/tasks/{id}/touch", {
        params: { path: { topic, id } },
        body: { token, ttr: options.ttr },
      }),
    );
    return new Date(data.deadline);
  }

  /** A topic task's state (`delayed`, `ready`, `reserved`, `done`, `dead`, `deleted`). */
  async getTask(topic: string, id: string): Promise<TaskView> {
    const { data } = await this.call(this.api.GET("/v1/topics/{topic}/tasks/{id}", { params: { path: { topic, id } } }));
    return data;
  }

  /**
   * Why a topic task is where it is: `state` (the main reason's code), every reason in
   * `causes`, a `summary` sentence, its instants and deliveries; `NotFoundError` when the task
   * is not in the topic.
   */
  async taskWhy(topic: string, id: string): Promise<TaskWhyView> {
    const { data } = await this.call(this.api.GET("/v1/topics/{topic}/tasks/{id}/why", { params: { path: { topic, id } } }));
    return data;
  }

  /** Delete a topic task in any state, for good. */
  async deleteTask(topic: string, id: string): Promise<void> {
    await this.call(this.api.DELETE("/v1/topics/{topic}/tasks/{id}", { params: { path: { topic, id } } }));
  }

  /** Every topic with its tasks by state. */
  async topics(): Promise<TopicList> {
    const { data } = await this.call(this.api.GET("/v1/topics"));
    return data;
  }

  /**
   * Declare how many partitions (1 to 64) `topic`'s tasks spread over, each on a shard of its
   * own, so a hot topic spreads over a cluster's masters. Set once, before the topic's first
   * task: the same count again changes nothing, another is refused (`ConflictError`).
   */
  async setTopic(topic: string, settings: { partitions: number }): Promise<TopicView> {
    const { data } = await this.call(
      this.api.PUT("/v1/topics/{topic}", { params: { path: { topic } }, body: { partitions: settings.partitions } }),
    );
    return data;
  }

  /** `topic`'s settings: its partitions (1 unless declared with more). */
  async getTopic(topic: string): Promise<TopicView> {
    const { data } = await this.call(this.api.GET("/v1/topics/{topic}", { params: { path: { topic } } }));
    return data;
  }

  /**
   * `topic`'s dead letters (tasks delivered `max_deliveries` times without a finish), newest
   * first, at most `limit` (1 to 1000, default 100). `NotFoundError` for an unknown topic.
   */
  async deadLetters(topic: string, options: { limit?: number } = {}): Promise<TopicDeadLetter[]> {
    const { data } = await this.call(
      this.api.GET("/v1/topics/{topic}/dead", { params: { path: { topic }, query: { limit: options.limit } } }),
    );
    return data.dead;
  }

  /** Make `topic`'s dead letters ready again (deliveries reset to 0): those of `ids`, or all. How many. */
  async replayDead(topic: string, ids?: readonly string[]): Promise<number> {
    const { data } = await this.call(
      this.api.POST("/v1/topics/{topic}/dead/replay", { params: { path: { topic }, query: { ids: ids?.join(",") } } }),
    );
    return data.count;
  }

  /** Delete `topic`'s dead letters for good: those of `ids`, or all. How many. */
  async purgeDead(topic: string, ids?: readonly string[]): Promise<number> {
    const { data } = await this.call(
      this.api.DELETE("/v1/topics/{topic}/dead", { params: { path: { topic }, query: { ids: ids?.join(",") } } }),
    );
    return data.count;
  }

  /** Pause `topic`: its pops reserve nothing until `resume` (adds go on). */
  async pause(topic: string): Promise<TopicPaused> {
    const { data } = await this.call(this.api.POST("/v1/topics/{topic}/pause", { params: { path: { topic } } }));
    return data;
  }

  /** Resume a paused `topic`: its ready tasks are delivered again, in order. */
  async resume(topic: string): Promise<TopicPaused> {
    const { data } = await this.call(this.api.POST("/v1/topics/{topic}/resume", { params: { path: { topic } } }));
    return data;
  }

  /** A `Consumer` of `topic` calling `handler` for each task (see `Consumer`). */
  consumer<P = unknown>(topic: string, handler: Handler<P>, options: ConsumerOptions = {}): Consumer<P> {
    return new Consumer<P>(this, topic, handler, options);
  }

  // --- one-shot tasks --------------------------------------------------------------------

  /**
   * Enqueue a one-shot task (`handler`, `params`, `after` or `at`; at once with neither).
   * With `dedup: { key, window }` (or `{ content: true, window }`), an enqueue of the same key
   * within the window creates nothing and resolves to the task created then (`duplicate`).
   * Without dedup, an `id` that exists is left as it is.
   *
   * With `after_task` (the id of another one-shot task), it runs only once that task
   * succeeded, `after` then being its delay after that success; until then its status is
   * `waiting`. If that task ends otherwise (dead, cancelled, deleted), this one goes to its
   * dead letters. Not with `at` or `dedup`; `InvalidError` (field `after_task`) for a task that
   * does not exist.
   */
  async enqueue(spec: TaskSpec): Promise<Enqueued> {
    const { data, response } = await this.call(this.api.POST("/v1/tasks", { body: spec }));
    return { job: data, created: response.status === 201, duplicate: data.duplicate === true };
  }

  /**
   * Enqueue one-shot tasks together (1 to 1000, each a `TaskSpec`); resolves to them as stored,
   * in the order given. Every task is checked before any is written: `InvalidError` names
   * `tasks[i].<field>`.
   *
   * With `onComplete`, the tasks are a batch: once every one has ended (succeeded, died, or was
   * cancelled or deleted), one signed POST goes to its URL with the counts (`type`
   * `keyfire.batch.completed`, `webhook-id` `batch:<batch id>:completed`), and the answer's
   * `batch_id` reads its progress (`getBatch`).
   */
  async enqueueBatch(tasks: readonly TaskSpec[], options: EnqueueBatchOptions = {}): Promise<TaskList> {
    const onComplete = typeof options.onComplete === "string" ? { url: options.onComplete } : options.onComplete;
    const { data } = await this.call(
      this.api.POST("/v1/tasks/batch", { body: { tasks: [...tasks], on_complete: onComplete } }),
    );
    return data;
  }

  /**
   * A batch's progress (`enqueueBatch` with `onComplete`): `total`, `succeeded`, `died`,
   * `cancelled`, `pending`, `created_ms`, and `completed_ms` once its last task ended.
   * `NotFoundError` for an unknown id, or 7 days after the batch completed.
   */
  async getBatch(id: string): Promise<BatchStatus> {
    const { data } = await this.call(this.api.GET("/v1/batches/{id}", { params: { path: { id } } }));
    return data;
  }

  // --- jobs ------------------------------------------------------------------------------

  /**
   * Create or replace the job `spec.id` (idempotent: the spec it already has changes nothing).
   * With `ifVersion`, only if the job is still at that version (0: only if it does not
   * exist), else `ConflictError`.
   */
  async putJob(spec: JobSpec, options: { ifVersion?: number } = {}): Promise<JobView> {
    const header = options.ifVersion === undefined ? undefined : { "If-Match": `"${options.ifVersion}"` };
    // POST /v1/jobs: the same upsert as PUT /v1/jobs/{id}, with the id in the body. `spec` is
    // checked against the document's JobSpec at the caller; openapi-fetch's own rewriting of a
    // `oneOf` body (an intersection with a union) is not assignable from it, hence the cast.
    const { data } = await this.call(this.api.POST("/v1/jobs", { params: { header }, body: spec as never }));
    return data;
  }

  /** Create a job; `ConflictError` when its id exists. */
  createJob(spec: JobSpec): Promise<JobView> {
    return this.putJob(spec, { ifVersion: 0 });
  }

  /**
   * Replace a job only if it is still at `version` (the `version` of the `JobView` it was read
   * as); `ConflictError` when it moved since.
   */
  updateJob(spec: JobSpec, version: number): Promise<JobView> {
    return this.putJob(spec, { ifVersion: version });
  }

  /** A job with its state, version and next five firings; `NotFoundError` when absent. */
  async getJob(id: string): Promise<JobView> {
    const { data } = await this.call(this.api.GET("/v1/jobs/{id}", { params: { path: { id } } }));
    return data;
  }

  /** Delete a job, its pending firing and its history; `NotFoundError` when absent. */
  async deleteJob(id: string): Promise<void> {
    await this.call(this.api.DELETE("/v1/jobs/{id}", { params: { path: { id } } }));
  }

  /**
   * Pause every active job of a handler, or whose id starts with a prefix (exactly one);
   * `matched` counts the jobs picked, `changed` those this call paused. `InvalidError` names
   * the field of a bad selection.
   */
  async pauseJobs(selection: JobSelection): Promise<BulkChanged> {
    const { data } = await this.call(this.api.POST("/v1/jobs:pause", { body: selection }));
    return data;
  }

  /** Resume every paused job a selection picks, each as a one-job resume would. */
  async resumeJobs(selection: JobSelection): Promise<BulkChanged> {
    const { data } = await this.call(this.api.POST("/v1/jobs:resume", { body: selection }));
    return data;
  }

  /** Pause a job: it fires nothing until resumed; `NotFoundError` when absent. */
  async pauseJob(id: string): Promise<JobView> {
    const { data } = await this.call(this.api.POST("/v1/jobs/{id}/pause", { params: { path: { id } } }));
    return data;
  }

  /**
   * Run each instant of a job's schedule from `from` to `to` (RFC 3339, both included; not in
   * the future, at most 10,000 instants) once, each as a firing of its own, at `rate` runs per
   * second (default 10, at most 100). Instants already run are skipped: `scheduled` and
   * `skipped` count them. `InvalidError` names a bad field; `NotFoundError` when absent.
   */
  async backfill(id: string, range: { from: string; to: string; rate?: number }): Promise<BackfillView> {
    const { data } = await this.call(
      this.api.POST("/v1/jobs/{id}/backfill", { params: { path: { id } }, body: range }),
    );
    return data;
  }

  /**
   * Cancel what a job has in progress, on whichever node runs it: `stopping` lists the running
   * firings told to stop (each recorded `cancelled` in the job's runs once its node stopped
   * it), `cancelled` those cancelled before they ran (queued retries, a one-shot job's pending
   * instant). Never retried. `NotFoundError` when absent, `ConflictError` (code
   * `nothing_to_cancel`) when nothing was in progress.
   */
  async cancelJob(id: string): Promise<CancelView> {
    const { data } = await this.call(this.api.POST("/v1/jobs/{id}/cancel", { params: { path: { id } } }));
    return data;
  }

  /**
   * A job's most recent runs, newest first. With `skipped`, also the instants that were due
   * and did not run, with their reasons, merged with the runs in `timeline` (each entry's
   * `kind` is `run` or `skipped`).
   */
  async runs(id: string, options: { limit?: number; skipped?: boolean } = {}): Promise<RunList> {
    const query = { limit: options.limit, include: options.skipped ? "skipped" : undefined };
    const { data } = await this.call(this.api.GET("/v1/jobs/{id}/runs", { params: { path: { id }, query } }));
    return data;
  }

  /**
   * Why a job or one-shot task runs or does not, now: `state` (the main reason's code), every
   * reason in `causes`, a `summary` sentence, its next firing, its last runs and skips;
   * `NotFoundError` when absent.
   */
  async why(id: string): Promise<WhyView> {
    const { data } = await this.call(this.api.GET("/v1/jobs/{id}/why", { params: { path: { id } } }));
    return data;
  }

  /**
   * Cancel a one-shot task: before it runs (it is then finished, its run recorded
   * `cancelled`), or while it runs. As `cancelJob`.
   */
  async cancelTask(id: string): Promise<CancelView> {
    const { data } = await this.call(this.api.POST("/v1/tasks/{id}/cancel", { params: { path: { id } } }));
    return data;
  }
}
