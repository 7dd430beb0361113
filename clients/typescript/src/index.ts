/**
 * keyfire's TypeScript client: a thin hand-written layer over openapi-fetch, typed by
 * openapi-typescript from the node's OpenAPI document (`./generated/schema.ts`).
 *
 *     import { Keyfire } from "@keyfire/client";
 *     const keyfire = new Keyfire({ baseUrl: "http://127.0.0.1:8080", token: process.env.KEYFIRE_TOKEN });
 *     await keyfire.add("orders", { order: 7 }, { delay: "30s" });
 *     await keyfire.consumer("orders", async (task) => console.log(task.payload)).run();
 *
 * See docs/client-typescript.md.
 */

export { Keyfire, Task } from "./client.js";
export type { AddOptions, BackfillView, BatchStatus, BulkChanged, CancelView, EnqueueBatchOptions, Enqueued, FinishOutcome, JobSelection, JobSpec, JobView, KeyfireOptions, OnComplete, PopOptions, RunList, TaskList, TaskSpec, TaskView, TaskWhyView, TopicDeadLetter, TopicList, TopicPaused, TopicView, WhyView } from "./client.js";
export { Consumer } from "./consumer.js";
export type { ConsumerOptions, ConsumerStats, Handler } from "./consumer.js";
export {
  ConflictError,
  ErrorCode,
  InvalidError,
  KeyfireError,
  NotFoundError,
  RedisFullError,
  UnauthorizedError,
  UnavailableError,
  UnreachableError,
} from "./errors.js";
export { WebhookVerificationError, WebhookVerifier } from "./webhooks.js";
export type { Delivery, WebhookHeaders } from "./webhooks.js";
export type { components, operations, paths } from "./generated/schema.js";
export { VERSION } from "./version.js";
