#!/usr/bin/env node
// Consumers in other languages on one flow: n tasks due at one instant, delayed -> taken ->
// done, measured from the due instant to the last finish, in one process per consumer
// outside the system under test.
//
//   node bench.mjs --system keyfire --lang python    # keyfire's delay queue over REST
//   node bench.mjs --system keyfire --lang node
//   node bench.mjs --system bullmq  --lang python    # BullMQ's own Python Worker
//   (BullMQ's Node Worker on this flow is ../bullmq/bench.mjs --scenario burst --n 20000)
//
// keyfire: a redis-server from keyfire's shipped redis.conf (persistence off, hz 100), and
// `--servers` `keyfire serve` processes started as `keyfire bench queue-rest` starts them
// (KEYFIRE__REDIS__URL, __PREFIX, __NODE__ID, __API__LISTEN; they serve topics, so they
// promote the delayed tasks). This driver adds the tasks over REST
// (`POST /v1/topics/bench/tasks` with `at`, an id and a 60 s ttr), after timing a probe of
// adds to pick a due instant every add ends before. The consumer
// (keyfire_consumer.{py,mjs}) runs `--consumers` loops, each popping batches of up to `--max`
// with `wait` and finishing each batch in one call.
//
// BullMQ (Python): a redis-server with hz 100 (as ../bullmq/bench.mjs starts it), the Worker
// (bullmq_worker.py worker: concurrency 100, a no-op processor) and the producer
// (bullmq_worker.py produce: Queue.addBulk of delayed jobs), both BullMQ's Python package.
//
// Prints one JSON line: tasks_per_s = tasks finished / (last finish - due instant), lost
// (tasks never finished), doubled (tasks handed out more than once), the lateness (consumer
// received minus due, ms; BullMQ: processing start minus due) and the CPU each process used
// over [due instant, last finish] in % of one core (2 cores = 200 %).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startRedis, redisVersion, summarize, procCpuMs } from '../bullmq/redis.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../../..');

function parseArgs(argv) {
  const a = {
    system: null, lang: null, n: 20000, hz: 100, servers: 2, consumers: 8, max: 100,
    wait: '500ms', concurrency: 100, chunk: 1000, timeout: 120,
    keyfire: process.env.KEYFIRE_BIN || path.join(root, 'target/release/keyfire'),
    python: process.env.PEERS_PYTHON || path.join(here, '.venv/bin/python'),
  };
  const strings = ['system', 'lang', 'wait', 'keyfire', 'python'];
  const numbers = ['n', 'hz', 'servers', 'consumers', 'max', 'concurrency', 'chunk', 'timeout'];
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '');
    const v = argv[i + 1];
    if (k === 'help' || k === 'h') { console.log(usage); process.exit(0); }
    if (v === undefined) throw new Error(`${argv[i]} needs a value`);
    if (strings.includes(k)) a[k] = v;
    else if (numbers.includes(k)) {
      a[k] = Number(v);
      if (!Number.isInteger(a[k]) || a[k] < 1) throw new Error(`--${k} must be a whole number ≥ 1, not '${v}'`);
    } else throw new Error(`unknown argument ${argv[i]}\n${usage}`);
    i++;
  }
  if (!['keyfire', 'bullmq'].includes(a.system)) throw new Error(`--system must be keyfire or bullmq, not '${a.system}'`);
  if (!['python', 'node'].includes(a.lang)) throw new Error(`--lang must be python or node, not '${a.lang}'`);
  if (a.system === 'bullmq' && a.lang === 'node') throw new Error('BullMQ with Node is ../bullmq/bench.mjs --scenario burst');
  if (a.max > 1000) throw new Error(`--max must be at most 1000 (the pop's limit), not ${a.max}`);
  if (a.lang === 'python' && !existsSync(a.python)) throw new Error(`no Python at ${a.python}: run side_by_side.sh once, or give --python`);
  if (a.system === 'keyfire' && !existsSync(a.keyfire)) throw new Error(`no keyfire binary at ${a.keyfire}: cargo build --release --bin keyfire, or give --keyfire`);
  return a;
}

const usage = `usage: node bench.mjs --system keyfire|bullmq --lang python|node [--n 20000]
  [--servers 2] [--consumers 8] [--max 100] [--wait 500ms]   keyfire's REST consumer
  [--concurrency 100] [--chunk 1000]                          BullMQ's Python Worker
  [--hz 100] [--timeout 120] [--keyfire BIN] [--python BIN]`;

const sleep = ms => new Promise(r => setTimeout(r, ms));

// A child speaking JSON lines on stdout; stdin stays open until close() (the child waits on it
// after its last line, so its CPU can still be read).
function child(cmd, args, opts = {}) {
  const proc = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'], ...opts });
  const lines = [];
  const waiters = [];
  let exited = null;
  readline.createInterface({ input: proc.stdout }).on('line', l => {
    let m;
    try { m = JSON.parse(l); } catch { process.stderr.write(`${l}\n`); return; }
    lines.push(m);
    for (const w of waiters.splice(0)) w();
  });
  proc.once('exit', code => { exited = code ?? 'signal'; for (const w of waiters.splice(0)) w(); });
  return {
    proc,
    // the next message of `type`, or an error when the child exits or `ms` pass first
    async next(type, ms) {
      const give = Date.now() + ms;
      for (;;) {
        const i = lines.findIndex(m => m.type === type);
        if (i >= 0) return lines.splice(i, 1)[0];
        if (exited !== null) throw new Error(`${path.basename(args[0] ?? cmd)} exited (${exited}) before '${type}'`);
        if (Date.now() > give) throw new Error(`no '${type}' from ${path.basename(args[0] ?? cmd)} within ${ms} ms`);
        await Promise.race([new Promise(r => waiters.push(r)), sleep(Math.min(1000, Math.max(1, give - Date.now())))]);
      }
    },
    async close() {
      if (exited !== null) return;
      const gone = new Promise(r => proc.once('exit', r));
      proc.stdin.end();
      const t = setTimeout(() => { if (exited === null) proc.kill('SIGKILL'); }, 10000);
      await gone;
      clearTimeout(t);
    },
  };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

// `keyfire serve` processes, as `keyfire bench queue-rest` starts them.
async function startServers(a, redisPort) {
  const servers = [];
  const stopAll = async () => {
    await Promise.all(servers.map(s => new Promise(r => {
      if (s.proc.exitCode !== null) return r();
      s.proc.once('exit', r);
      s.proc.kill('SIGTERM'); // a node leaves the live set as it stops
      setTimeout(() => { if (s.proc.exitCode === null) s.proc.kill('SIGKILL'); }, 5000);
    })));
  };
  try {
    for (let i = 0; i < a.servers; i++) {
      const port = await freePort();
      const proc = spawn(a.keyfire, ['serve'], {
        stdio: ['ignore', 'ignore', 'inherit'],
        env: {
          ...process.env,
          KEYFIRE__REDIS__URL: `redis://127.0.0.1:${redisPort}`,
          KEYFIRE__REDIS__PREFIX: 'bench',
          KEYFIRE__NODE__ID: `peers-rest-${process.pid}-${i}`,
          KEYFIRE__API__LISTEN: `127.0.0.1:${port}`,
          RUST_LOG: 'warn',
        },
      });
      servers.push({ proc, url: `http://127.0.0.1:${port}` });
    }
    const giveUp = Date.now() + 30000;
    for (const s of servers) {
      for (;;) {
        if (s.proc.exitCode !== null) throw new Error(`keyfire serve at ${s.url} exited (${s.proc.exitCode})`);
        const ok = await fetch(`${s.url}/readyz`).then(r => r.ok, () => false);
        if (ok) break;
        if (Date.now() > giveUp) throw new Error(`keyfire serve at ${s.url} did not get ready in 30 s`);
        await sleep(50);
      }
    }
  } catch (e) {
    await stopAll();
    throw e;
  }
  return { urls: servers.map(s => s.url), pids: servers.map(s => s.proc.pid), stop: stopAll };
}

// Add tasks over REST, `inFlight` requests at once, round-robin over the servers.
async function addTasks(urls, topic, count, body, inFlight = 32) {
  let next = 0;
  const worker = async w => {
    for (let k = next++; k < count; k = next++) {
      const url = `${urls[(k + w) % urls.length]}/v1/topics/${topic}/tasks`;
      const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body(k)) });
      const text = await r.text();
      if (r.status !== 201) throw new Error(`add ${k}: ${r.status} ${text.slice(0, 200)}`);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, (_, w) => worker(w)));
}

// CPU ms of each pid, read now.
const cpuOf = pids => pids.map(p => { try { return procCpuMs(p); } catch { return null; } });
const pct = (a, b, wallMs) => (a === null || b === null || wallMs <= 0 ? null : Math.round(((b - a) / wallMs) * 100));

async function runKeyfire(a) {
  const redis = await startRedis({ hz: a.hz, conf: path.join(root, 'redis.conf') });
  let servers;
  let consumer;
  try {
    servers = await startServers(a, redis.port);
    const topic = 'bench';
    const script = a.lang === 'python' ? [a.python, [path.join(here, 'keyfire_consumer.py')]] : [process.execPath, [path.join(here, 'keyfire_consumer.mjs')]];
    const cfg = { urls: servers.urls, topic, n: a.n, consumers: a.consumers, max: a.max, wait: a.wait, timeout_s: a.timeout + 60 };
    consumer = child(script[0], [...script[1], JSON.stringify(cfg)]);
    const ready = await consumer.next('ready', 30000);

    // Time a probe of adds (due in a day, another topic) to pick the lead, as `bench queue` does.
    const probe = Math.max(100, Math.min(a.n, 2000));
    let t0 = Date.now();
    await addTasks(servers.urls, 'bench-probe', probe, k => ({ payload: { k }, delay: '1d' }));
    const rate = probe / Math.max((Date.now() - t0) / 1000, 1e-3);
    const due = Math.round(Date.now() + 2000 + (1.5 * a.n / Math.max(rate, 100)) * 1000);
    const at = new Date(due).toISOString();
    t0 = Date.now();
    await addTasks(servers.urls, topic, a.n, k => ({ id: `t${k}`, payload: { k, due }, at, ttr: '60s' }));
    const enqueueS = (Date.now() - t0) / 1000;
    const added = { due_ms: due, enqueue_s: enqueueS, enqueue_per_s: Math.round(a.n / enqueueS), enqueue_finished_before_due: Date.now() < due };

    const measured = await measure(a, consumer, due, [redis.pid, consumer.proc.pid, ...servers.pids]);
    const [redisCpu, consumerCpu, ...serverCpu] = measured.cpu;
    const topics = await fetch(`${servers.urls[0]}/v1/topics`).then(r => r.json()).catch(e => ({ error: String(e) }));
    // keyfire's own counts of the topic: delivered and done must be n, redelivered 0
    const mine = (topics.topics ?? []).find(t => t.topic === topic);
    return {
      ...result(a, added, measured.res, due),
      servers: a.servers, consumers: a.consumers, pop_max: a.max, pop_wait: a.wait,
      cpu_pct: { redis: redisCpu, consumer: consumerCpu, servers: serverCpu },
      server_counts: mine ? { added: mine.added, delivered: mine.delivered, redelivered: mine.redelivered, done: mine.done } : topics,
      ...ready.versions,
      keyfire_version: await fetch(`${servers.urls[0]}/v1/openapi.json`).then(r => r.json()).then(d => d.info?.version, () => null),
    };
  } finally {
    if (consumer) await consumer.close();
    if (servers) await servers.stop();
    await redis.stop();
  }
}

async function runBullmqPython(a) {
  const redis = await startRedis({ hz: a.hz });
  let worker;
  try {
    const queue = `bench${Date.now()}`;
    const cfg = { port: redis.port, queue, n: a.n, concurrency: a.concurrency, chunk: a.chunk, timeout_s: a.timeout + 60 };
    const script = path.join(here, 'bullmq_worker.py');
    worker = child(a.python, [script, 'worker', JSON.stringify(cfg)]);
    const ready = await worker.next('ready', 30000);
    const producer = child(a.python, [script, 'produce', JSON.stringify(cfg)]);
    const added = await producer.next('added', (a.timeout + 60) * 1000);
    await producer.close();
    const measured = await measure(a, worker, added.due_ms, [redis.pid, worker.proc.pid]);
    const [redisCpu, consumerCpu] = measured.cpu;
    return {
      ...result(a, added, measured.res, added.due_ms),
      concurrency: a.concurrency,
      cpu_pct: { redis: redisCpu, consumer: consumerCpu },
      ...ready.versions,
    };
  } finally {
    if (worker) await worker.close();
    await redis.stop();
  }
}

// Wait for the consumer's result; CPU of `pids` over [due, its last finish].
async function measure(a, consumer, due, pids) {
  let atDue = null;
  const mark = setTimeout(() => { atDue = cpuOf(pids); }, Math.max(0, due - Date.now()));
  let res;
  try {
    res = await consumer.next('done', Math.max(0, due - Date.now()) + (a.timeout + 90) * 1000);
  } finally {
    clearTimeout(mark);
  }
  const atDone = cpuOf(pids);
  const wall = res.last_finish_ms - due;
  return { res, cpu: pids.map((_, i) => (atDue ? pct(atDue[i], atDone[i], wall) : null)) };
}

function firstToLast(res, due) {
  if (!res.lat.length) return 0;
  const first = due + Math.min(...res.lat);
  const span = res.last_finish_ms - first;
  return span > 0 ? Math.round((res.finished / span) * 1000) : 0;
}

function result(a, added, res, due) {
  const wall = res.last_finish_ms - due;
  const out = {
    bench: 'consumers', system: a.system, lang: a.lang, n: a.n, hz: a.hz,
    enqueue_s: Math.round(added.enqueue_s * 1000) / 1000,
    enqueue_per_s: added.enqueue_per_s,
    enqueue_finished_before_due: added.enqueue_finished_before_due,
    finished: res.finished,
    lost: a.n - res.finished,
    doubled: res.doubled,
    refused: res.refused,
    due_to_last_finish_ms: Math.round(wall),
    tasks_per_s: res.finished && wall > 0 ? Math.round((res.finished / wall) * 1000) : 0,
    // the drain alone: from the first task the consumer received to its last finish
    first_to_last_per_s: firstToLast(res, due),
    ...Object.fromEntries(Object.entries(summarize(res.lat)).map(([k, v]) => [k === 'count' ? 'lateness_count' : `lateness_${k}`, v])),
  };
  if (res.timed_out) out.timed_out = true;
  if (res.errors?.length) out.consumer_errors = res.errors;
  return out;
}

let a;
try {
  a = parseArgs(process.argv.slice(2));
} catch (e) {
  console.error(e.message);
  process.exit(2);
}
const meta = { node: process.version, redis_version: redisVersion() };
const out = a.system === 'keyfire' ? await runKeyfire(a) : await runBullmqPython(a);
console.log(JSON.stringify({ ...out, ...meta }));
process.exit(out.lost === 0 && out.doubled === 0 && !out.consumer_errors ? 0 : 1);
