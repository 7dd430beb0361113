// A Node consumer of keyfire's delay queue over REST, as a service would write one with
// nothing but Node's built-in fetch (its undici pool keeps connections alive between calls).
//
// `consumers` loops, spread round-robin over the servers' URLs, each: long-poll
// `POST /v1/topics/{topic}/pop?max=&wait=` for a batch, then one
// `POST /v1/topics/{topic}/finish` for the whole batch. It stops once `n` distinct tasks are
// finished (or at `timeout_s`), then prints its result for bench.mjs.
//
// Protocol with bench.mjs (stdout, one JSON line each): {"type":"ready"} once it polls, then
// {"type":"done", ...}; then it waits for stdin to close, so the driver can read its CPU.
const cfg = JSON.parse(process.argv[2]);
const { urls, topic, n, consumers, max, wait } = cfg;
const deadline = Date.now() + cfg.timeout_s * 1000;

const times = new Map(); // task id -> times popped
const redelivered = new Set(); // ids popped with deliveries > 1 (popped before, by anyone)
const finishedIds = new Set(); // ids whose finish answered `done`
let refused = 0;
let lastFinish = 0;
const lat = []; // received by this consumer minus due (payload.due), ms
const errors = [];

async function call(url, body) {
  const r = await fetch(url, {
    method: 'POST',
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${url}: ${r.status} ${text.slice(0, 200)}`);
  return JSON.parse(text);
}

async function consume(base) {
  const pop = `${base}/v1/topics/${topic}/pop?max=${max}&wait=${wait}`;
  const finish = `${base}/v1/topics/${topic}/finish`;
  while (finishedIds.size < n && Date.now() < deadline) {
    const { tasks } = await call(pop);
    if (tasks.length === 0) continue;
    const got = Date.now();
    for (const t of tasks) {
      lat.push(got - t.payload.due);
      times.set(t.id, (times.get(t.id) ?? 0) + 1);
      if (t.deliveries > 1) redelivered.add(t.id);
    }
    const { results } = await call(finish, { tasks: tasks.map(t => ({ id: t.id, token: t.token })) });
    lastFinish = Date.now();
    for (const o of results) {
      if (o.outcome === 'done') finishedIds.add(o.id);
      else refused++;
    }
  }
}

// One request per server before "ready": the connections exist and the servers answer.
for (const u of urls) {
  const r = await fetch(`${u}/healthz`);
  await r.text();
}
process.stdout.write(JSON.stringify({ type: 'ready', versions: { node: process.version } }) + '\n');

const loops = [];
for (let i = 0; i < consumers; i++) {
  loops.push(consume(urls[i % urls.length]).catch(e => { errors.push(String(e)); }));
}
await Promise.all(loops);

const doubled = new Set(redelivered);
for (const [id, c] of times) if (c > 1) doubled.add(id);
process.stdout.write(JSON.stringify({
  type: 'done',
  finished: finishedIds.size,
  popped: times.size,
  doubled: doubled.size,
  refused,
  last_finish_ms: lastFinish,
  lat,
  errors: errors.slice(0, 3),
}) + '\n');
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
