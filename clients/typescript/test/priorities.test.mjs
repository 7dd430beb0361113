// A topic task's priority and a dedup key's `on_duplicate` (debounce), through the thin `add`
// and `addWithOutcome`, against a real node.

import assert from "node:assert/strict";
import { after, before } from "node:test";

import { InvalidError, Keyfire } from "../dist/index.js";
import { newTopic, startNode, test } from "./node.mjs";

let node;
let keyfire;

before(async () => {
  node = await startNode();
  keyfire = new Keyfire({ baseUrl: node.url, token: node.token });
});
after(async () => node?.stop());

test("pops take the highest priority first", async () => {
  const topic = newTopic();
  for (const [i, p] of [0, 9, 3].entries()) await keyfire.add(topic, i, { priority: p });
  const popped = await keyfire.pop(topic, { max: 10, wait: "1s" });
  assert.deepEqual(popped.map((t) => t.payload), [1, 2, 0]);
  await assert.rejects(keyfire.add(topic, 1, { priority: 10 }), (e) => e instanceof InvalidError && e.field === "priority");
});

test("a duplicate replaces the pending task", async () => {
  const topic = newTopic();
  const dedup = { key: "digest:7", window: "1h", on_duplicate: "replace" };
  const first = await keyfire.addWithOutcome(topic, { v: 1 }, { delay: "1h", dedup });
  assert.equal(first.deduplicated, undefined);
  const again = await keyfire.addWithOutcome(topic, { v: 2 }, { delay: "1h", dedup });
  assert.deepEqual([again.id, again.deduplicated], [first.id, "replaced"]);
  assert.deepEqual((await keyfire.getTask(topic, first.id)).payload, { v: 2 });
});
