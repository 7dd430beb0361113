// Fan-in: a batch of tasks with a completion callback (`enqueueBatch(tasks, { onComplete })`)
// calls a local receiver once, signed, with the counts `getBatch` reads; a task enqueued with
// `after_task` waits for another; bad input names its field.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";

import { InvalidError, Keyfire, NotFoundError, WebhookVerifier } from "../dist/index.js";
import { nodeForFile, startReceiver, test } from "./node.mjs";

let node;
let keyfire;
nodeForFile(Keyfire, (started, client) => ([node, keyfire] = [started, client]));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const suffix = () => randomBytes(4).toString("hex");

/** Poll `read` until `done(value)`, up to 30 s; the value. */
async function until(what, read, done) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await sleep(50);
  }
}

/** `assert.rejects` that also hands back the error. */
async function rejection(promise, Class) {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof Class, `expected ${Class.name}, got ${err?.name}: ${err?.message}`);
    return err;
  }
  assert.fail(`expected ${Class.name}, nothing was thrown`);
}

test("a batch calls back once its tasks ended, with the counts", async () => {
  const receiver = await startReceiver();
  try {
    const batch = await keyfire.enqueueBatch(
      [{ handler: "log", params: { n: 1 } }, { handler: "log", after: "1h" }],
      { onComplete: `${receiver.url}/batch-done` },
    );
    assert.ok(batch.batch_id);
    const ids = batch.tasks.map((t) => t.id);
    assert.equal(new Set(ids).size, 2);
    // Each task is stored as a member of the batch.
    assert.deepEqual(batch.tasks.map((t) => t.spec.batch), [batch.batch_id, batch.batch_id]);

    let status = await keyfire.getBatch(batch.batch_id);
    assert.deepEqual([status.id, status.total], [batch.batch_id, 2]);
    assert.ok(status.created_ms > 0);
    // The first task runs at once; the second waits an hour, and the batch with it.
    status = await until("the first task to succeed", () => keyfire.getBatch(batch.batch_id), (s) => s.succeeded >= 1);
    assert.deepEqual([status.succeeded, status.died, status.cancelled, status.pending], [1, 0, 0, 1]);
    assert.equal(status.completed_ms ?? null, null);
    assert.equal(receiver.unread(), 0, "a callback before the batch's last task ended");

    await keyfire.cancelTask(ids[1]);
    const { path, body, headers } = await receiver.next();
    assert.equal(path, "/batch-done");
    const delivery = new WebhookVerifier(node.signingSecret).verify(body, headers);
    assert.equal(delivery.id, `batch:${batch.batch_id}:completed`);
    const sent = JSON.parse(body.toString());
    assert.equal(sent.type, "keyfire.batch.completed");
    assert.deepEqual(sent.data, { batch_id: batch.batch_id, total: 2, succeeded: 1, died: 0, cancelled: 1 });

    status = await keyfire.getBatch(batch.batch_id);
    assert.deepEqual([status.succeeded, status.died, status.cancelled, status.pending], [1, 0, 1, 0]);
    assert.ok(status.completed_ms >= status.created_ms);
    assert.equal(receiver.unread(), 0, "more than one callback");
  } finally {
    await receiver.close();
  }
});

test("a batch takes onComplete with its secrets, and without it has no id", async () => {
  // An unreachable receiver: the answer and the counts do not depend on it.
  const batch = await keyfire.enqueueBatch(
    Array.from({ length: 3 }, () => ({ handler: "log", after: "1h" })),
    { onComplete: { url: "http://127.0.0.1:9/never", signing_secrets: [node.signingSecret] } },
  );
  assert.ok(batch.batch_id);
  assert.equal(batch.tasks.length, 3);
  let status = await keyfire.getBatch(batch.batch_id);
  assert.deepEqual([status.total, status.pending, status.succeeded], [3, 3, 0]);
  for (const t of batch.tasks) await keyfire.deleteJob(t.id);
  status = await keyfire.getBatch(batch.batch_id);
  assert.deepEqual([status.cancelled, status.pending], [3, 0]);
  assert.ok(status.completed_ms);

  const plain = await keyfire.enqueueBatch([{ handler: "log", after: "1h" }]);
  assert.equal(plain.batch_id ?? null, null);
  assert.equal(plain.tasks.length, 1);
  await keyfire.deleteJob(plain.tasks[0].id);
});

test("a batch refuses bad input, naming the field", async () => {
  let err = await rejection(
    keyfire.enqueueBatch([{ handler: "log" }, { handler: "log", id: `mine-${suffix()}` }], { onComplete: "http://127.0.0.1:9/" }),
    InvalidError,
  );
  assert.deepEqual([err.status, err.code, err.field], [422, "invalid", "tasks[1].id"]);
  err = await rejection(keyfire.enqueueBatch([{ handler: "log" }], { onComplete: "ftp://127.0.0.1/" }), InvalidError);
  assert.equal(err.field, "on_complete.url");
});

test("an unknown batch is not found", async () => {
  const err = await rejection(keyfire.getBatch(`no-such-${suffix()}`), NotFoundError);
  assert.deepEqual([err.status, err.field], [404, "id"]);
});

test("after_task waits for its task; that task cancelled, it is a dead letter", async () => {
  const first = await keyfire.enqueue({ handler: "log", after: "1h" });
  const second = await keyfire.enqueue({ handler: "log", after: "5s", after_task: first.job.id });
  assert.equal(second.created, true);
  assert.equal(second.job.status, "waiting");
  assert.equal(second.job.spec.after_task, first.job.id);
  assert.equal((await keyfire.getJob(second.job.id)).status, "waiting");
  assert.equal((await keyfire.why(second.job.id)).state, "after_task");

  await keyfire.cancelTask(first.job.id);
  const job = await keyfire.getJob(second.job.id);
  assert.deepEqual([job.status, job.dead, job.runs], ["finished", 1, 0]);
  const { runs } = await keyfire.runs(second.job.id);
  assert.equal(runs.length, 1);
  assert.deepEqual([runs[0].outcome, runs[0].fate], ["skipped", "dead"]);
  assert.equal(runs[0].error, `after_task ${first.job.id} ended cancelled`);
  await keyfire.deleteJob(first.job.id);
  await keyfire.deleteJob(second.job.id);
});

test("after_task runs once its task succeeded", async () => {
  const first = await keyfire.enqueue({ handler: "log", params: { step: 1 } });
  const second = await keyfire.enqueue({ handler: "log", params: { step: 2 }, after_task: first.job.id });
  // Waiting or due already (when the first had ended), it runs after the first succeeded.
  await until("the second task to run", () => keyfire.getJob(second.job.id), (j) => j.status === "finished");
  const [before] = (await keyfire.runs(first.job.id)).runs;
  const [after] = (await keyfire.runs(second.job.id)).runs;
  assert.deepEqual([before.outcome, after.outcome], ["ok", "ok"]);
  assert.ok(new Date(after.started_at) >= new Date(before.finished_at), `${after.started_at} < ${before.finished_at}`);
  await keyfire.deleteJob(first.job.id);
  await keyfire.deleteJob(second.job.id);
});

test("after_task naming no task is refused with 422 naming after_task", async () => {
  const missing = `nobody-${suffix()}`;
  const err = await rejection(keyfire.enqueue({ handler: "log", after_task: missing }), InvalidError);
  assert.deepEqual([err.status, err.code, err.field], [422, "invalid", "after_task"]);
  assert.match(err.message, new RegExp(missing));
});

test("a topic batch reads its counts as its tasks are finished", async () => {
  const topic = `fanin-${suffix()}`;
  const added = await keyfire.addBatch(topic, [{ payload: { n: 1 } }, { payload: { n: 2 } }], {
    onComplete: "http://127.0.0.1:9/topic-batch",
  });
  assert.ok(added.batch_id);
  assert.equal(added.tasks.length, 2);
  assert.equal((await keyfire.getBatch(added.batch_id)).pending, 2);
  const tasks = await keyfire.pop(topic, { max: 2, wait: "2s" });
  assert.deepEqual(tasks.map((t) => t.id).sort(), added.tasks.map((t) => t.id).sort());
  await keyfire.finish(topic, tasks);
  const status = await keyfire.getBatch(added.batch_id);
  assert.deepEqual([status.total, status.succeeded, status.pending], [2, 2, 0]);
  assert.ok(status.completed_ms);
  const plain = await keyfire.addBatch(topic, [{ payload: 3 }]);
  assert.equal(plain.batch_id, undefined);
  assert.equal(plain.tasks.length, 1);
});
