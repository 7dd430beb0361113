// A consumer that dies mid-batch: run by consumer.test.mjs, which SIGKILLs it.
//
// Usage: node consumer-child.mjs URL TOKEN TOPIC BATCH FINISH_FIRST
//
// It pops one batch of BATCH tasks, finishes the first FINISH_FIRST of them (each at once), then
// prints `blocked <id>,<id>,...` (the ids it holds unfinished) and hangs in its handler.

import { Keyfire } from "../dist/index.js";

const [url, token, topic, batch, finishFirst] = process.argv.slice(2);
const keyfire = new Keyfire({ baseUrl: url, token });
const popped = [];
const finished = new Set();

// Record what the pop returned and what was finished, to report exactly what is held.
const realPop = keyfire.pop.bind(keyfire);
const realFinish = keyfire.finish.bind(keyfire);
keyfire.pop = async (...args) => {
  const tasks = await realPop(...args);
  popped.push(...tasks.map((t) => t.id));
  return tasks;
};
keyfire.finish = async (topicName, tasks) => {
  const outcomes = await realFinish(topicName, tasks);
  for (const [id, outcome] of Object.entries(outcomes)) if (outcome === "done") finished.add(id);
  return outcomes;
};

let handled = 0;
const consumer = keyfire.consumer(
  topic,
  async () => {
    handled += 1;
    if (handled <= Number(finishFirst)) return;
    console.log(`blocked ${popped.filter((id) => !finished.has(id)).join(",")}`);
    await new Promise(() => {}); // until the test kills this process
  },
  { batch: Number(batch), wait: "10s", flushIntervalMs: 0 },
);
console.log("ready");
await consumer.run();
