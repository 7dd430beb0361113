// Type-checked, not run (`npm run typecheck`): the documented uses of the client compile
// against its published types, so a change of the OpenAPI document that would break them
// fails CI. The examples of docs/client-typescript.md, in short.

import {
  ConflictError,
  ErrorCode,
  InvalidError,
  Keyfire,
  KeyfireError,
  UnavailableError,
  WebhookVerificationError,
  WebhookVerifier,
  type BatchStatus,
  type JobSpec,
  type JobView,
  type Task,
  type TaskSpec,
} from "@keyfire/client";

export async function usage(): Promise<void> {
  const keyfire = new Keyfire({ baseUrl: "http://127.0.0.1:8080", token: process.env.KEYFIRE_TOKEN });

  const id: string = await keyfire.add("orders", { order: 7 }, { delay: "30s", ttr: "60s", maxDeliveries: 5 });
  await keyfire.add("orders", [1, 2, 3], { at: new Date(), id: `order-${id}` });

  const consumer = keyfire.consumer<{ order: number }>(
    "orders",
    async (task: Task<{ order: number }>) => {
      const order: number = task.payload.order;
      await task.keepAlive(async () => order * 2);
      await task.touch("2m");
    },
    { batch: 100, wait: "10s", concurrency: 4 },
  );
  process.once("SIGTERM", () => void consumer.stop());
  await consumer.run();
  const finished: number = consumer.stats.finished;

  const tasks = await keyfire.pop("orders", { max: 10, wait: "1s" });
  const outcomes = await keyfire.finish("orders", tasks);
  const outcome: string | undefined = outcomes[tasks[0]?.id ?? ""];

  const spec: TaskSpec = {
    handler: "http",
    after: "30m",
    params: { url: "https://billing.internal/hooks/invoice", body: { invoice: 42 } },
    dedup: { key: "invoice-42:reminder", window: "1h" },
  };
  const { job, created, duplicate } = await keyfire.enqueue(spec);
  const then = await keyfire.enqueue({ handler: "log", after: "5m", after_task: job.id });
  const waiting: boolean = then.job.status === "waiting";

  const batch = await keyfire.enqueueBatch([{ handler: "http", params: { url: "https://billing.internal/hooks/invoice" } }, { handler: "log" }], {
    onComplete: { url: "https://billing.internal/hooks/batch-done", signing_secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"] },
  });
  await keyfire.enqueueBatch([{ handler: "log" }], { onComplete: "https://billing.internal/hooks/batch-done" });
  const progress: BatchStatus = await keyfire.getBatch(batch.batch_id ?? "");
  const counts: number[] = [progress.total, progress.succeeded, progress.died, progress.cancelled, progress.pending];
  const ended: number | null | undefined = progress.completed_ms;
  void [waiting, batch.tasks[0]?.id, counts, ended];

  const jobSpec: JobSpec = { id: "weekday-report", cron: "0 9 * * MON-FRI", tz: "Europe/Berlin", handler: "log", params: { to: "ops@example.com" } };
  const view: JobView = await keyfire.createJob(jobSpec);
  await keyfire.updateJob({ ...jobSpec, cron: "30 8 * * MON-FRI" }, view.version);
  await keyfire.putJob({ id: "every-30s", every: "30s", handler: "log" });
  await keyfire.getJob("weekday-report");
  const why = await keyfire.why("weekday-report");
  const state: string = why.state;
  const summary: string = why.summary;
  void [state, summary, why.causes[0]?.code, why.next_at];
  const { timeline } = await keyfire.runs("weekday-report", { skipped: true, limit: 50 });
  for (const entry of timeline ?? []) {
    if (entry.kind === "skipped") void [entry.skipped?.reason, entry.skipped?.count, entry.skipped?.first_at];
    else void entry.run?.outcome;
  }
  await keyfire.pauseJob("weekday-report");
  await keyfire.deleteJob("weekday-report");

  try {
    await keyfire.add("orders", {}, { delay: "soon" });
  } catch (err) {
    if (err instanceof InvalidError) console.log(err.code === ErrorCode.Invalid, err.field, err.message, err.status);
    else if (err instanceof ConflictError || err instanceof UnavailableError || err instanceof KeyfireError) throw err;
  }

  const verifier = new WebhookVerifier("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  try {
    const delivery = verifier.verify("{}", { "webhook-id": "a", "webhook-timestamp": "1", "webhook-signature": "v1,x" });
    console.log(delivery.id, delivery.jobId, delivery.attempt, delivery.json<{ invoice: number }>().invoice);
  } catch (err) {
    if (!(err instanceof WebhookVerificationError)) throw err;
  }

  const { data } = await keyfire.api.GET("/v1/limits");
  console.log(id, finished, outcome, job.id, created, duplicate, data);
}
