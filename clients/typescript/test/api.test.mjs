// Typed errors carrying code, message and field; job CRUD with If-Match versions; enqueue with
// dedup; cancel; the package's version.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";

import {
  ConflictError,
  ErrorCode,
  InvalidError,
  Keyfire,
  KeyfireError,
  NotFoundError,
  UnauthorizedError,
  UnavailableError,
  VERSION,
} from "../dist/index.js";
import { newTopic, nodeForFile, ROOT, test } from "./node.mjs";

let node;
let keyfire;
nodeForFile(Keyfire, (started, client) => ([node, keyfire] = [started, client]));

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

test("bad input names the field and writes nothing", async () => {
  const topic = newTopic();
  let err = await rejection(keyfire.add(topic, { order: 7 }, { delay: "soon" }), InvalidError);
  assert.equal(err.code, ErrorCode.Invalid);
  assert.equal(err.field, "delay");
  assert.equal(err.status, 422);
  assert.match(err.message, /soon/);
  assert.deepEqual(await keyfire.pop(topic, { max: 10 }), []); // nothing was added

  err = await rejection(
    keyfire.enqueue({ handler: "http", params: { url: "http://127.0.0.1:9/", signing_secrets: ["not-a-secret"] } }),
    InvalidError,
  );
  assert.equal(err.code, "invalid");
  assert.equal(err.field, "params.signing_secrets[0]");

  err = await rejection(keyfire.putJob({ id: "bad-cron", cron: "61 * * * *", handler: "log" }), InvalidError);
  assert.equal(err.field, "cron");
  await rejection(keyfire.getJob("bad-cron"), NotFoundError);

  // A query parameter is a 400 with its own code, still named.
  err = await rejection(keyfire.pop(topic, { wait: "2m" }), InvalidError);
  assert.deepEqual([err.code, err.field, err.status], ["bad_query", "wait", 400]);

  err = await rejection(keyfire.pop("not a topic!"), InvalidError);
  assert.equal(err.status, 422);
  assert.ok(err.field);
});

test("each kind of failure has its class", async () => {
  const topic = newTopic();
  let err = await rejection(keyfire.getTask(topic, "no-such-task"), NotFoundError);
  assert.deepEqual([err.code, err.status], ["not_found", 404]);

  const id = await keyfire.add(topic, null, { ttr: "30s" });
  const [task] = await keyfire.pop(topic);
  assert.equal(task.id, id);
  assert.equal(task.payload, null);
  assert.equal(await task.finish(), "done");
  err = await rejection(task.touch(), ConflictError); // the reservation ended with the finish
  assert.deepEqual([err.code, err.status], ["conflict", 409]);

  err = await rejection(new Keyfire({ baseUrl: node.url, token: "wrong" }).topics(), UnauthorizedError);
  assert.deepEqual([err.code, err.status], ["unauthorized", 401]);

  assert.ok(err instanceof KeyfireError && err instanceof Error);
  assert.ok(!(new ConflictError("conflict", "x") instanceof UnavailableError));
});

test("job CRUD round trip with If-Match versions", async () => {
  const id = `report-${randomBytes(4).toString("hex")}`;
  const spec = { id, cron: "0 9 * * MON-FRI", tz: "Europe/Berlin", handler: "log", params: { to: "ops@example.com" } };

  const created = await keyfire.createJob(spec);
  assert.deepEqual([created.id, created.status, created.version], [id, "active", 1]);
  assert.equal(created.spec.cron, "0 9 * * MON-FRI");
  assert.deepEqual(created.spec.params, { to: "ops@example.com" });
  assert.equal(created.next_firings.length, 5);
  await rejection(keyfire.createJob(spec), ConflictError); // only creates

  const read = await keyfire.getJob(id);
  assert.equal(read.version, 1);
  assert.deepEqual(read.spec, created.spec);

  // Same spec: nothing changes, not even the version.
  assert.equal((await keyfire.putJob(spec)).version, 1);

  const updated = await keyfire.updateJob({ ...spec, cron: "30 8 * * MON-FRI" }, read.version);
  assert.equal(updated.version, 2);
  assert.equal(updated.spec.cron, "30 8 * * MON-FRI");
  // A writer holding the old version is refused, and changes nothing.
  const err = await rejection(keyfire.updateJob({ ...spec, cron: "0 7 * * *" }, read.version), ConflictError);
  assert.equal(err.status, 409);
  assert.equal((await keyfire.getJob(id)).spec.cron, "30 8 * * MON-FRI");

  await keyfire.deleteJob(id);
  await rejection(keyfire.getJob(id), NotFoundError);
  await rejection(keyfire.deleteJob(id), NotFoundError);
});

test("jobs pause and resume in bulk, by id prefix", async () => {
  const prefix = `bulk-${randomBytes(4).toString("hex")}-`;
  for (const n of ["0", "1", "2"]) await keyfire.putJob({ id: prefix + n, every: "1h", handler: "log" });
  await keyfire.putJob({ id: prefix + "x", every: "1h", handler: "noop" });

  assert.deepEqual(await keyfire.pauseJobs({ id_prefix: prefix }), { matched: 4, changed: 4 });
  assert.equal((await keyfire.getJob(prefix + "0")).status, "paused");
  assert.deepEqual(await keyfire.pauseJobs({ id_prefix: prefix }), { matched: 4, changed: 0 });
  assert.equal((await keyfire.resumeJobs({ id_prefix: prefix })).changed, 4);
  assert.equal((await keyfire.getJob(prefix + "x")).status, "active");

  const err = await rejection(keyfire.pauseJobs({ id_prefix: "" }), InvalidError);
  assert.equal(err.field, "id_prefix");
  for (const n of ["0", "1", "2", "x"]) await keyfire.deleteJob(prefix + n);
});

test("why names a job's state, and runs list its ledger", async () => {
  const id = `yearly-${randomBytes(4).toString("hex")}`;
  await keyfire.createJob({ id, cron: "0 0 1 1 *", handler: "log" });
  let why = await keyfire.why(id);
  assert.equal(why.state, "waiting");
  assert.ok(why.next_in_ms > 0);
  assert.match(why.summary, new RegExp(id));
  await keyfire.pauseJob(id);
  why = await keyfire.why(id);
  assert.equal(why.state, "paused");
  assert.equal(why.causes[0].code, "paused");
  // The default answer has no timeline; `skipped` adds it (nothing was skipped yet).
  assert.equal((await keyfire.runs(id)).timeline, undefined);
  assert.deepEqual((await keyfire.runs(id, { skipped: true })).timeline, []);
  await rejection(keyfire.why(`nope-${randomBytes(4).toString("hex")}`), NotFoundError);
  await keyfire.deleteJob(id);
});

test("a backfill runs a past range once", async () => {
  const id = `yearly-${randomBytes(4).toString("hex")}`;
  await keyfire.createJob({ id, cron: "0 0 1 1 *", handler: "noop" });
  const range = { from: "2020-06-01T00:00:00Z", to: "2023-06-01T00:00:00Z" };
  const done = await keyfire.backfill(id, { ...range, rate: 100 });
  assert.deepEqual([done.instants, done.scheduled, done.skipped], [3, 3, 0]);
  const again = await keyfire.backfill(id, range);
  assert.deepEqual([again.scheduled, again.skipped], [0, 3]);
  const err = await rejection(keyfire.backfill(id, { ...range, rate: 1000 }), InvalidError);
  assert.equal(err.field, "rate");
  await keyfire.deleteJob(id);
});

test("enqueue with dedup creates one task", async () => {
  const key = `order-${randomBytes(4).toString("hex")}:reminder`;
  const spec = { handler: "log", after: "1h", params: { order: 7 }, dedup: { key, window: "10m" } };
  const first = await keyfire.enqueue(spec);
  const again = await keyfire.enqueue(spec);
  assert.deepEqual([first.created, first.duplicate], [true, false]);
  assert.deepEqual([again.created, again.duplicate], [false, true]);
  assert.equal(again.job.id, first.job.id);
  await keyfire.deleteJob(first.job.id);
});

test("a pending task is cancelled before it runs; then nothing is left to cancel", async () => {
  const { job } = await keyfire.enqueue({ handler: "log", after: "1h" });
  const done = await keyfire.cancelTask(job.id);
  assert.equal(done.job_id, job.id);
  assert.deepEqual(done.stopping, []);
  assert.equal(done.cancelled.length, 1);
  assert.ok(done.cancelled[0].startsWith(`${job.id}:`), done.cancelled[0]);
  assert.equal((await keyfire.getJob(job.id)).status, "finished");
  const err = await rejection(keyfire.cancelJob(job.id), ConflictError);
  assert.deepEqual([err.code, err.status], [ErrorCode.NothingToCancel, 409]);
  await rejection(keyfire.cancelJob(`nope-${randomBytes(4).toString("hex")}`), NotFoundError);
  await keyfire.deleteJob(job.id);
});

test("a topic's partitions are declared once, then read back; another count is refused", async () => {
  const topic = newTopic();
  assert.equal((await keyfire.getTopic(topic)).partitions, 1);
  assert.deepEqual(await keyfire.setTopic(topic, { partitions: 4 }), { topic, partitions: 4, paused: false });
  assert.deepEqual(await keyfire.setTopic(topic, { partitions: 4 }), { topic, partitions: 4, paused: false });
  await rejection(keyfire.setTopic(topic, { partitions: 2 }), ConflictError); // set once
  const err = await rejection(keyfire.setTopic(newTopic(), { partitions: 65 }), InvalidError);
  assert.equal(err.field, "partitions");
  assert.equal((await keyfire.getTopic(topic)).partitions, 4);
  const id = await keyfire.add(topic, { n: 1 });
  const [task] = await keyfire.pop(topic, { max: 1 });
  assert.equal(task.id, id);
});

test("taskWhy names where a topic task is", async () => {
  const topic = newTopic();
  const first = await keyfire.add(topic, { n: 1 });
  const second = await keyfire.add(topic, { n: 2 });
  let why = await keyfire.taskWhy(topic, second);
  assert.equal(why.state, "ready");
  assert.equal(why.ready_ahead, 1);
  assert.ok(why.summary.includes(`topic ${topic}`), why.summary);
  await keyfire.pause(topic);
  why = await keyfire.taskWhy(topic, first);
  assert.equal(why.state, "paused");
  assert.deepEqual(why.causes.map((c) => c.code), ["paused", "ready"]);
  await keyfire.resume(topic);
  await rejection(keyfire.taskWhy(topic, "no-such-task"), NotFoundError);
  const err = await rejection(keyfire.taskWhy(topic, "a:b"), InvalidError);
  assert.equal(err.field, "id");
});

test("the package's version follows the server's", () => {
  const cargo = readFileSync(join(ROOT, "Cargo.toml"), "utf8");
  const server = /\[workspace\.package\][^[]*?\nversion = "([^"]+)"/.exec(cargo)?.[1];
  const pkg = JSON.parse(readFileSync(join(ROOT, "clients/typescript/package.json"), "utf8"));
  assert.ok(server);
  assert.equal(pkg.version, server);
  assert.equal(VERSION, server);
});

test("error bodies map to classes whatever route answered", async () => {
  const { errorFromResponse, RedisFullError } = await import("../dist/errors.js");
  const full = errorFromResponse(507, { error: { code: "redis_full", message: "Redis is full", field: null } }, new Headers({ "retry-after": "30" }));
  assert.ok(full instanceof RedisFullError && full instanceof UnavailableError);
  assert.deepEqual([full.code, full.status, full.retryAfter, full.field], ["redis_full", 507, 30, null]);
  // A proxy's page in front of the node: no keyfire body, the status decides.
  const gateway = errorFromResponse(502, "<html>Bad Gateway</html>");
  assert.equal(gateway.constructor, UnavailableError);
  assert.equal(gateway.code, "unavailable");
  assert.match(gateway.message, /Bad Gateway/);
  // A code this client does not know yet keeps its code, under the status's class.
  const later = errorFromResponse(409, { error: { code: "moved", message: "m", field: "id" } });
  assert.ok(later instanceof ConflictError);
  assert.deepEqual([later.code, later.field], ["moved", "id"]);
});
