// A topic's dead letters (listed, replayed, purged) and its pause, through the thin methods,
// against a real node.

import assert from "node:assert/strict";

import { InvalidError, Keyfire, NotFoundError } from "../dist/index.js";
import { newTopic, nodeForFile, test } from "./node.mjs";

let node;
let keyfire;
nodeForFile(Keyfire, (started, client) => ([node, keyfire] = [started, client]));

/** `n` tasks delivered once, popped and left to lapse: dead letters. Their ids. */
async function kill(topic, n) {
  const ids = [];
  for (let i = 0; i < n; i++) {
    ids.push(await keyfire.add(topic, { n: i }, { id: `${topic}-${i}`, ttr: "200ms", maxDeliveries: 1 }));
  }
  assert.equal((await keyfire.pop(topic, { max: n, wait: "1s" })).length, n);
  const deadline = Date.now() + 20_000;
  while ((await keyfire.deadLetters(topic)).length < n) {
    assert.ok(Date.now() < deadline, "the reservations never became dead letters");
    await keyfire.pop(topic); // a pop takes back expired reservations first
    await new Promise((r) => setTimeout(r, 100));
  }
  return ids;
}

test("dead letters are listed, replayed and purged", async () => {
  const topic = newTopic();
  const ids = await kill(topic, 3);
  const dead = await keyfire.deadLetters(topic, { limit: 10 });
  assert.deepEqual(dead.map((d) => d.id).sort(), ids);
  for (const d of dead) {
    assert.equal(d.deliveries, 1);
    assert.match(d.error ?? "", /delivery 1 of 1/);
    assert.ok(d.died_at);
  }
  assert.equal((await keyfire.deadLetters(topic, { limit: 2 })).length, 2);

  assert.equal(await keyfire.replayDead(topic, [ids[0], "nosuch"]), 1);
  const again = await keyfire.pop(topic, { wait: "1s" });
  assert.deepEqual(again.map((t) => [t.id, t.deliveries]), [[ids[0], 1]]);
  assert.equal(await keyfire.purgeDead(topic, [ids[1]]), 1);
  assert.equal((await keyfire.getTask(topic, ids[1])).state, "deleted");
  assert.equal(await keyfire.replayDead(topic), 1);
  assert.deepEqual((await keyfire.pop(topic, { max: 10, wait: "1s" })).map((t) => t.id), [ids[2]]);
  assert.equal(await keyfire.purgeDead(topic), 0);

  const bad = await keyfire.replayDead(topic, ["ok", "not an id"]).catch((e) => e);
  assert.ok(bad instanceof InvalidError, String(bad));
  assert.equal(bad.field, "ids[1]");
  const unknown = await keyfire.deadLetters(`${topic}-none`).catch((e) => e);
  assert.ok(unknown instanceof NotFoundError, String(unknown));
});

test("a paused topic pops nothing until resumed", async () => {
  const topic = newTopic();
  const first = await keyfire.add(topic, { n: 1 });
  const held = await keyfire.pop(topic);
  assert.deepEqual(held.map((t) => t.id), [first]);
  const p = await keyfire.pause(topic);
  assert.deepEqual([p.paused, p.changed], [true, true]);
  assert.equal((await keyfire.getTopic(topic)).paused, true);
  const second = await keyfire.add(topic, { n: 2 });
  assert.deepEqual(await keyfire.pop(topic, { max: 10, wait: "300ms" }), []);
  assert.equal(await held[0].finish(), "done");
  const r = await keyfire.resume(topic);
  assert.deepEqual([r.paused, r.changed], [false, true]);
  assert.deepEqual((await keyfire.pop(topic, { max: 10, wait: "1s" })).map((t) => t.id), [second]);
});
