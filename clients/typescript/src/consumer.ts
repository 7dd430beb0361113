/**
 * `Consumer`: pops a topic in batches, runs a handler per task, finishes them in batches.
 *
 * Delivery is at least once: a task is finished only after its handler resolved; a handler
 * that throws leaves its task reserved until its time-to-run passes, and the topic hands it
 * out again (up to its `max_deliveries`, then to the dead letters). Use `task.deliveries` or
 * the task id to make the work idempotent.
 */

import type { Keyfire, Task, FinishOutcome } from "./client.js";
import { UnavailableError } from "./errors.js";

export type Handler<P = unknown> = (task: Task<P>) => unknown | Promise<unknown>;

export interface ConsumerOptions {
  /** Tasks per pop, 1 to 1000 (default 100). */
  batch?: number;
  /** How long a pop waits for the first task (default `"5s"`, at most `"60s"`). */
  wait?: string;
  /** Handlers running at once (default 1: in order). */
  concurrency?: number;
  /** Send finishes this long after the first unsent one, even mid-batch (default 1000 ms). */
  flushIntervalMs?: number;
  /** Backoff while the node is away or answers 503: from this (default 100 ms)… */
  backoffBaseMs?: number;
  /** …doubling up to this (default 10 s), with jitter. */
  backoffMaxMs?: number;
  /** Called when a handler throws (default: `console.error`). */
  onError?: (task: Task<any>, error: unknown) => void;
  /** Called when a call is retried after the node was away or answered 503. */
  onRetry?: (error: UnavailableError, delayMs: number) => void;
}

/** Counts since the consumer started. */
export interface ConsumerStats {
  popped: number;
  /** Finished with outcome `done`. */
  finished: number;
  /** The handler threw: left to come back after its time-to-run. */
  failed: number;
  /** Finished too late (`lost`: the reservation had expired) or deleted (`not_found`). */
  lost: number;
  /** Calls that met an unreachable or unavailable node and were retried. */
  retries: number;
}

/**
 * Consume `topic`: long-poll pops of up to `batch` tasks, `handler(task)` for each, and batch
 * finishes of the tasks whose handler resolved.
 *
 * - A node that is away or answers 503 (or 507, Redis full) is retried with exponential
 *   backoff and jitter, never sooner than the answer's `Retry-After`; other errors (a wrong
 *   token, a bad topic name) reject `run()` with their typed error.
 * - `stop()` stops popping; the tasks in hand are worked through and finished (they are
 *   reserved to this consumer), then `run()` resolves. A pop in flight returns within `wait`.
 *   Wire it to your signals: `process.once("SIGTERM", () => consumer.stop())`.
 * - For work longer than the time-to-run, `task.touch()` or `task.keepAlive(work)`.
 */
export class Consumer<P = unknown> {
  readonly stats: ConsumerStats = { popped: 0, finished: 0, failed: 0, lost: 0, retries: 0 };
  readonly #keyfire: Keyfire;
  readonly #topic: string;
  readonly #handler: Handler<P>;
  readonly #batch: number;
  readonly #wait: string;
  readonly #concurrency: number;
  readonly #flushIntervalMs: number;
  readonly #backoffBaseMs: number;
  readonly #backoffMaxMs: number;
  readonly #onError: (task: Task<P>, error: unknown) => void;
  readonly #onRetry: (error: UnavailableError, delayMs: number) => void;
  #stopping = false;
  #wake: (() => void) | undefined;
  #running: Promise<void> | undefined;
  #pending: Task<P>[] = [];
  #pendingSince = 0;

  constructor(keyfire: Keyfire, topic: string, handler: Handler<P>, options: ConsumerOptions = {}) {
    const batch = options.batch ?? 100;
    if (!Number.isInteger(batch) || batch < 1 || batch > 1000) throw new RangeError("batch must be 1 to 1000");
    const concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError("concurrency must be at least 1");
    this.#keyfire = keyfire;
    this.#topic = topic;
    this.#handler = handler;
    this.#batch = batch;
    this.#wait = options.wait ?? "5s";
    this.#concurrency = concurrency;
    this.#flushIntervalMs = options.flushIntervalMs ?? 1000;
    this.#backoffBaseMs = options.backoffBaseMs ?? 100;
    this.#backoffMaxMs = options.backoffMaxMs ?? 10_000;
    this.#onError =
      options.onError ??
      ((task, error) =>
        console.error(`keyfire consumer: handler failed on task ${task.id} of ${task.topic} (delivery ${task.deliveries}); it comes back after its ttr:`, error));
    this.#onRetry =
      options.onRetry ?? ((error, delayMs) => console.warn(`keyfire consumer: ${error.message}; retrying in ${Math.round(delayMs)} ms`));
  }

  get stopping(): boolean {
    return this.#stopping;
  }

  /** Consume until `stop()`; resolves then, or rejects with an error that retrying cannot fix. */
  run(): Promise<void> {
    this.#running ??= this.#loop();
    return this.#running;
  }

  /** Stop popping; resolves when the tasks in hand are finished and `run()` has resolved. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#wake?.();
    await this.#running?.catch(() => undefined);
  }

  async #loop(): Promise<void> {
    try {
      while (!this.#stopping) {
        const tasks = await this.#retrying(() => this.#keyfire.pop<P>(this.#topic, { max: this.#batch, wait: this.#wait }));
        if (tasks === undefined) break; // stopped while the node was away
        this.stats.popped += tasks.length;
        await this.#work(tasks);
        await this.#flush(false);
      }
    } finally {
      await this.#flush(true);
    }
  }

  async #work(tasks: Task<P>[]): Promise<void> {
    let next = 0;
    const worker = async () => {
      while (next < tasks.length) {
        const task = tasks[next++]!;
        let ok = true;
        try {
          await this.#handler(task);
        } catch (error) {
          ok = false;
          try {
            this.#onError(task, error);
          } catch {
            // A failing error hook must not stop the consumer.
          }
        }
        if (!ok) {
          this.stats.failed += 1;
        } else {
          if (this.#pending.length === 0) this.#pendingSince = Date.now();
          this.#pending.push(task);
        }
        if (this.#pending.length > 0 && Date.now() - this.#pendingSince >= this.#flushIntervalMs) {
          await this.#flush(false);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, tasks.length) }, worker));
  }

  /**
   * Finish what the handlers completed. While the node is away this retries until the consumer
   * stops (then for a few more attempts).
   */
  async #flush(final: boolean): Promise<void> {
    if (this.#pending.length === 0) return;
    const batch = this.#pending;
    this.#pending = [];
    const outcomes = await this.#retrying(() => this.#keyfire.finish(this.#topic, batch), final ? 8 : undefined);
    if (outcomes === undefined) {
      console.warn(`keyfire consumer: ${batch.length} finished tasks not acknowledged (node away); they will be delivered again after their ttr`);
      return;
    }
    for (const task of batch) {
      const outcome: FinishOutcome | undefined = outcomes[task.id];
      if (outcome === "done") {
        this.stats.finished += 1;
      } else {
        this.stats.lost += 1;
        console.warn(
          `keyfire consumer: task ${task.id} of ${this.#topic} finished as ${outcome}: its reservation expired before the finish, so it may run again`,
        );
      }
    }
  }

  /**
   * `call()`, retried with backoff while the node is away or answers 503; undefined when the
   * consumer stopped (or `attempts` ran out) before it got through.
   */
  async #retrying<T>(call: () => Promise<T>, attempts?: number): Promise<T | undefined> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await call();
      } catch (error) {
        if (!(error instanceof UnavailableError)) throw error;
        this.stats.retries += 1;
        if (attempts !== undefined && attempt >= attempts) return undefined;
        // At least what the node asked for (507 comes with a Retry-After).
        const delay = Math.max(this.#backoff(attempt), (error.retryAfter ?? 0) * 1000);
        this.#onRetry(error, delay);
        if (attempts === undefined) {
          if (await this.#sleepUnlessStopped(delay)) return undefined;
        } else {
          await new Promise((resolve) => setTimeout(resolve, delay));
        }
      }
    }
  }

  /**
   * Exponential, capped, with jitter: between half and all of the capped delay, so consumers
   * that lost the node together do not come back in lockstep.
   */
  #backoff(attempt: number): number {
    const ceiling = Math.min(this.#backoffMaxMs, this.#backoffBaseMs * 2 ** (attempt - 1));
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }

  /** Sleep `ms`; true when `stop()` came first. */
  #sleepUnlessStopped(ms: number): Promise<boolean> {
    if (this.#stopping) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#wake = undefined;
        resolve(false);
      }, ms);
      this.#wake = () => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve(true);
      };
    });
  }
}
