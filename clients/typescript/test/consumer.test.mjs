// The consumer against a real node: 10,000 tasks once each, redelivery after a consumer dies
// mid-batch, backoff while the node is away.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { Keyfire, UnavailableError, UnreachableError } from "../dist/index.js";
import { freePort, newTopic, nodeForFile, startNode, test } from "./node.mjs";

let node;
let keyfire;
nodeForFile(Keyfire, (started, client) => ([node, keyfire] = [started, client]));

test("a consumer finishes 10,000 tasks, none lost or doubled", async () => {
  const topic = newTopic();
  const n = 10_000;
  const seen = new Map();
  let allSeen;
  const done = new Promise((resolve) => (allSeen = resolve));
  const consumer = keyfire.consumer(
    topic,
    (task) => {
      seen.set(task.id, (seen.get(task.id) ?? 0) + 1);
      if (seen.size === n) allSeen();
    },
    { batch: 500, wait: "2s" },
  );
  // Consume while the tasks are being added, as a consumer of a live topic does.
  const running = consumer.run();

  const ids = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < n) {
        const i = next++;
        ids[i] = await keyfire.add(topic, { i });
      }
    }),
  );
  assert.equal(new Set(ids).size, n);

  const timeout = setTimeout(() => allSeen(), 120_000);
  await done;
  clearTimeout(timeout);
  assert.equal(seen.size, n, `only ${seen.size} of ${n} tasks consumed`);
  await consumer.stop();
  await running;

  assert.deepEqual(new Set(seen.keys()), new Set(ids), "a task consumed that was not added, or one never consumed");
  const doubled = [...seen].filter(([, count]) => count !== 1);
  assert.deepEqual(doubled, [], "tasks handled more than once");
  assert.deepEqual(consumer.stats, { popped: n, finished: n, failed: 0, lost: 0, retries: 0 });
  // Everything was acknowledged: nothing comes back, and the tasks are done.
  assert.deepEqual(await keyfire.pop(topic, { max: 1000 }), []);
  for (const k of [0, n / 2, n - 1]) assert.equal((await keyfire.getTask(topic, ids[k])).state, "done");
});

test("the tasks of a killed consumer come back after their ttr", async () => {
  const topic = newTopic();
  const ids = [];
  for (let k = 0; k < 20; k++) ids.push(await keyfire.add(topic, { k }, { ttr: "3s" }));

  const child = spawn(
    process.execPath,
    [fileURLToPath(new URL("consumer-child.mjs", import.meta.url)), node.url, node.token, topic, "20", "5"],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  let held;
  try {
    assert.equal((await lines.next()).value, "ready");
    const line = (await lines.next()).value ?? "";
    assert.match(line, /^blocked /);
    held = line.slice("blocked ".length).split(",");
  } finally {
    child.kill("SIGKILL");
    await exited;
  }
  const killedAt = Date.now();

  // The reservations hold until their ttr: nothing to pop at once...
  assert.deepEqual(await keyfire.pop(topic, { max: 100 }), []);
  const finished = ids.filter((id) => !held.includes(id));
  assert.equal(finished.length, 5);
  assert.equal(held.length, 15);
  for (const id of held) assert.equal((await keyfire.getTask(topic, id)).state, "reserved");
  for (const id of finished) assert.equal((await keyfire.getTask(topic, id)).state, "done");

  // ...then every held task comes back, as its second delivery; the finished ones do not.
  const back = [];
  while (back.length < held.length && Date.now() - killedAt < 30_000) {
    back.push(...(await keyfire.pop(topic, { max: 100, wait: "5s" })));
  }
  assert.ok(Date.now() - killedAt >= 2000, "redelivered before the ttr ran out");
  assert.deepEqual(back.map((t) => t.id).sort(), [...held].sort());
  assert.deepEqual(new Set(back.map((t) => t.deliveries)), new Set([2]));
  assert.deepEqual(new Set(Object.values(await keyfire.finish(topic, back))), new Set(["done"]));
});

test("a consumer backs off while the node is away, and stops", async () => {
  // Nothing listens on this port: every pop gets no answer.
  const away = new Keyfire({ baseUrl: `http://127.0.0.1:${await freePort()}` });
  const delays = [];
  const consumer = away.consumer("orders", () => {}, {
    backoffBaseMs: 10,
    backoffMaxMs: 200,
    onRetry: (_err, ms) => delays.push(ms),
  });
  const running = consumer.run();
  const deadline = Date.now() + 10_000;
  while (consumer.stats.retries < 6 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.ok(consumer.stats.retries >= 6, `only ${consumer.stats.retries} retries`);
  const started = Date.now();
  await consumer.stop();
  await running;
  assert.ok(Date.now() - started < 2000, "stop waited out the backoff");
  // Exponential, capped, between half and all of the ceiling.
  assert.ok(delays[0] >= 5 && delays[0] <= 10, `first delay ${delays[0]}`);
  assert.ok(delays[2] >= 20 && delays[2] <= 40, `third delay ${delays[2]}`);
  await assert.rejects(away.pop("orders"), (err) => err instanceof UnreachableError && err.code === "unreachable" && err.status === null);
});

test("a consumer backs off while Redis is away, then resumes", async () => {
  // A node of this test's own, whose Redis goes away: the node answers 503 meanwhile.
  const own = await startNode({ persist: true });
  try {
    const client = new Keyfire({ baseUrl: own.url, token: own.token });
    const topic = newTopic();
    const handled = [];
    const retried = [];
    const consumer = client.consumer(topic, (task) => handled.push(task.id), {
      wait: "1s",
      backoffBaseMs: 50,
      backoffMaxMs: 500,
      onRetry: (err) => retried.push(err),
    });
    const running = consumer.run();
    await own.stopRedis();
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    let deadline = Date.now() + 20_000;
    while (retried.length === 0 && Date.now() < deadline) await sleep(50);
    // Answered, not unreachable: 503, which the consumer retries after a backoff.
    assert.ok(retried.length > 0);
    for (const err of retried) {
      assert.ok(err instanceof UnavailableError && !(err instanceof UnreachableError) && err.status === 503, String(err));
    }

    await own.startRedis();
    let id;
    deadline = Date.now() + 30_000;
    while (id === undefined) {
      // The node reconnects to Redis on its own.
      try {
        id = await client.add(topic, { after: "outage" });
      } catch (err) {
        if (!(err instanceof UnavailableError) || Date.now() > deadline) throw err;
        await sleep(200);
      }
    }
    deadline = Date.now() + 30_000;
    while (!handled.includes(id) && Date.now() < deadline) await sleep(50);
    assert.deepEqual(handled, [id]);
    await consumer.stop();
    await running;
    assert.equal(consumer.stats.finished, 1);
    assert.equal((await client.getTask(topic, id)).state, "done");
  } finally {
    await own.stop();
  }
});

test("keepAlive holds a task past its ttr", async () => {
  const topic = newTopic();
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  await keyfire.add(topic, { long: true }, { ttr: "1s" });
  const [task] = await keyfire.pop(topic, { wait: "5s" });
  await task.keepAlive(async () => {
    // touched every third of the ttr
    await sleep(2500);
    assert.deepEqual(await keyfire.pop(topic), [], "taken from its holder while touched");
  });
  assert.equal(await task.finish(), "done");

  // Without touching, the same wait loses it to the next consumer.
  await keyfire.add(topic, { long: true }, { ttr: "1s" });
  const [held] = await keyfire.pop(topic, { wait: "5s" });
  await sleep(2500);
  const [again] = await keyfire.pop(topic, { wait: "5s" });
  assert.equal(again.id, held.id);
  assert.equal(again.deliveries, 2);
  assert.equal(await held.finish(), "lost");
  assert.equal(await again.finish(), "done");
});
