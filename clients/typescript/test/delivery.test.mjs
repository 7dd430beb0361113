// A task with the `http` handler reaches a local receiver (node.mjs's `startReceiver`), which
// verifies it with the Standard Webhooks library (through `WebhookVerifier`).

import assert from "node:assert/strict";

import { Keyfire, WebhookVerificationError, WebhookVerifier } from "../dist/index.js";
import { newSecret, nodeForFile, startReceiver, test } from "./node.mjs";

let node;
let keyfire;
nodeForFile(Keyfire, (started, client) => ([node, keyfire] = [started, client]));

test("an http task verifies under the node's secret", async () => {
  const receiver = await startReceiver();
  try {
    const enqueued = await keyfire.enqueue({ handler: "http", params: { url: `${receiver.url}/hooks/order`, body: { order: 7 } } });
    assert.equal(enqueued.created, true);

    const { path, body, headers } = await receiver.next();
    assert.equal(path, "/hooks/order");
    const delivery = new WebhookVerifier(node.signingSecret).verify(body, headers);
    assert.equal(delivery.jobId, enqueued.job.id);
    assert.ok(delivery.id.startsWith(`${enqueued.job.id}:`));
    assert.equal(delivery.attempt, 1);
    assert.deepEqual(delivery.json(), { order: 7 });

    // The same request with one byte changed, or under another secret, does not verify.
    const changed = Buffer.from(body.toString().replace("7", "8"));
    assert.throws(() => new WebhookVerifier(node.signingSecret).verify(changed, headers), WebhookVerificationError);
    assert.throws(() => new WebhookVerifier(newSecret()).verify(body, headers), WebhookVerificationError);
  } finally {
    await receiver.close();
  }
});

test("an http task verifies under its own secrets while rotating", async () => {
  const receiver = await startReceiver();
  try {
    const [oldSecret, newSecretValue] = [newSecret(), newSecret()];
    const enqueued = await keyfire.enqueue({
      handler: "http",
      params: { url: `${receiver.url}/hook`, body: "plain text", signing_secrets: [newSecretValue, oldSecret] },
      dedup: { key: `rotate-${receiver.url}`, window: "1m" },
    });
    const { body, headers } = await receiver.next();
    assert.equal(body.toString(), "plain text");
    // A job's own secrets win over the node's; a receiver holding either one accepts.
    for (const secret of [oldSecret, newSecretValue]) {
      assert.equal(new WebhookVerifier(secret).verify(body, headers).jobId, enqueued.job.id);
    }
    assert.equal(new WebhookVerifier(newSecret(), oldSecret).verify(body.toString(), new Headers(headers)).id, headers["webhook-id"]);
    assert.throws(() => new WebhookVerifier(node.signingSecret).verify(body, headers), WebhookVerificationError);
    assert.throws(
      () => new WebhookVerifier(oldSecret).verify(body, { ...headers, "webhook-timestamp": "1000000000" }),
      WebhookVerificationError,
    );
  } finally {
    await receiver.close();
  }
});
