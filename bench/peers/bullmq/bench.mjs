#!/usr/bin/env node
// BullMQ delayed-job baseline: lateness, burst throughput, enqueue rate.
//
// Each scenario run starts its own redis-server (free loopback port 6390-6399),
// forks a worker process (worker.mjs: one Worker, no-op processor), enqueues
// delayed jobs with Queue.addBulk from this process and prints one JSON line.
//
//   node bench.mjs                                  # default matrix, 2 runs each
//   node bench.mjs --scenario spread --n 1000 --hz 10 --runs 1
//   node bench.mjs --scenario burst  --n 50000 --concurrency 100
//   node bench.mjs --scenario enqueue --n 100000 --chunk 1000
//   node bench.mjs --pkg bullmq5 --matrix core      # smaller matrix against the latest BullMQ 5.x
//
// lateness = processing start (Date.now() in processor) - (job timestamp + delay)
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import IORedis from 'ioredis';
import { startRedis, redisVersion, summarize, procCpuMs } from './redis.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const pkgVersion = (name, from = here) => JSON.parse(readFileSync(path.join(from, 'node_modules', name, 'package.json'))).version;
let Queue; // loaded from the chosen package in main()

function parseArgs(argv) {
  const a = { runs: 2, hz: 10, spread: 5, concurrency: 100, chunk: 1000, timeout: 120, pkg: 'bullmq' };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '');
    const v = argv[i + 1];
    if (['scenario', 'pkg', 'matrix'].includes(k)) { a[k] = v; i++; }
    else if (['n', 'hz', 'spread', 'concurrency', 'chunk', 'timeout', 'runs', 'lead', 'pending'].includes(k)) { a[k] = Number(v); i++; }
    else throw new Error(`unknown arg ${argv[i]}`);
  }
  return a;
}

const sleep = ms => new Promise(r => setTimeout(r, ms));

function startWorker(cfg) {
  const child = fork(path.join(here, 'worker.mjs'), [JSON.stringify(cfg)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const state = { child, ready: null, done: null, errors: [] };
  state.ready = new Promise((resolve, reject) => {
    child.on('message', m => {
      if (m.type === 'ready') resolve();
      else if (m.type === 'error') state.errors.push(m.message);
    });
    child.once('exit', code => reject(new Error(`worker exited early rc=${code}`)));
  });
  state.done = new Promise(resolve => child.on('message', m => { if (m.type === 'done' || m.type === 'partial') resolve(m); }));
  state.close = async () => {
    if (child.exitCode !== null) return;
    const exited = new Promise(r => child.once('exit', r));
    try { child.send({ type: 'close' }); } catch { /* ignore */ }
    const t = setTimeout(() => { if (child.exitCode === null) child.kill('SIGKILL'); }, 8000);
    await exited;
    clearTimeout(t);
  };
  return state;
}

// Enqueue n delayed jobs whose absolute due times are dueOf(i); returns enqueue seconds.
async function enqueue(queue, n, chunk, dueOf) {
  const t0 = Date.now();
  for (let i = 0; i < n; i += chunk) {
    const now = Date.now();
    const jobs = [];
    for (let j = i; j < Math.min(n, i + chunk); j++) {
      const due = dueOf(j);
      jobs.push({ name: 'noop', data: { due }, opts: { timestamp: now, delay: Math.max(0, due - now) } });
    }
    await queue.addBulk(jobs);
  }
  return (Date.now() - t0) / 1000;
}

async function runDelayed(a, run) {
  const redis = await startRedis({ hz: a.hz });
  const qname = `bench${Date.now()}`;
  const connection = { host: '127.0.0.1', port: redis.port };
  const queue = new Queue(qname, { connection, defaultJobOptions: { removeOnComplete: true, removeOnFail: true } });
  let w;
  try {
    await queue.waitUntilReady();
    // optional backlog: `pending` jobs due in an hour, never processed during the run (the sparse scenario)
    let pendingBytesPerJob;
    if (a.pending) {
      const probe = new IORedis({ host: '127.0.0.1', port: redis.port });
      const used = async () => Number((await probe.info('memory')).match(/used_memory:(\d+)/)[1]);
      const before = await used();
      const far = Date.now() + 3600_000;
      await enqueue(queue, a.pending, a.chunk, () => far);
      pendingBytesPerJob = Math.round((await used() - before) / a.pending);
      await probe.quit();
    }
    w = startWorker({ port: redis.port, queue: qname, concurrency: a.concurrency, n: a.n, pkg: a.pkg });
    await w.ready;
    // lead: time reserved for enqueueing before the first job is due
    const lead = (a.lead ?? 2 + a.n / 15000) * 1000;
    const base = Date.now() + lead;
    const spreadMs = a.scenario === 'burst' ? 0 : a.spread * 1000;
    const dueOf = i => Math.round(base + (spreadMs * i) / a.n);
    const enqueueS = await enqueue(queue, a.n, a.chunk, dueOf);
    const enqueueDone = Date.now();
    const lastDue = dueOf(a.n - 1);
    // CPU accounting over the processing window [first due, all done]
    let redisCpuAtBase = null;
    const markTimer = setTimeout(() => {
      redisCpuAtBase = procCpuMs(redis.pid);
      w.child.send({ type: 'mark' });
    }, Math.max(0, base - Date.now()));
    const timeoutAt = lastDue + a.timeout * 1000;
    let res = await Promise.race([w.done, sleep(Math.max(0, timeoutAt - Date.now())).then(() => null)]);
    const redisCpuAtDone = procCpuMs(redis.pid);
    clearTimeout(markTimer);
    let timedOut = false;
    if (!res) {
      timedOut = true;
      w.child.send({ type: 'report' });
      res = await Promise.race([w.done, sleep(5000).then(() => ({ lat: [], started: 0, completed: 0 }))]);
    }
    const s = summarize(res.lat);
    const out = {
      bench: 'bullmq_delayed', scenario: a.scenario, n: a.n, hz: a.hz,
      spread_s: a.scenario === 'burst' ? 0 : a.spread, concurrency: a.concurrency, run,
      enqueue_s: Math.round(enqueueS * 1000) / 1000,
      enqueue_jobs_per_s: Math.round(a.n / enqueueS),
      enqueue_finished_before_first_due: enqueueDone < base,
      processed: res.completed ?? 0,
      lost: a.n - (res.completed ?? 0),
      doubled: res.doubled ?? 0,
      timed_out: timedOut,
      ...(a.pending ? { pending: a.pending, redis_bytes_per_pending_job: pendingBytesPerJob } : {}),
      ...s,
    };
    if (res.lastCompleted) {
      // from the first due instant to the last job completed
      const wall = res.lastCompleted - base;
      out.first_due_to_all_done_ms = Math.round(wall);
      out.last_due_to_all_done_ms = Math.round(res.lastCompleted - lastDue);
      if (a.scenario === 'burst') out.throughput_jobs_per_s = Math.round((res.completed / wall) * 1000);
      else out.effective_jobs_per_s = Math.round((res.completed / Math.max(wall, 1)) * 1000);
      // share of one core used during the processing window (2 cores = 200%)
      if (redisCpuAtBase !== null && wall > 0) {
        out.redis_cpu_pct = Math.round(((redisCpuAtDone - redisCpuAtBase) / wall) * 100);
        if (res.workerCpuMs !== null && res.workerCpuMs !== undefined) out.worker_cpu_pct = Math.round((res.workerCpuMs / wall) * 100);
      }
    }
    if (w.errors.length) out.worker_errors = w.errors.slice(0, 3);
    return out;
  } finally {
    if (w) await w.close();
    await queue.close().catch(() => {});
    await redis.stop();
  }
}

async function runEnqueue(a, run) {
  const redis = await startRedis({ hz: a.hz });
  const qname = `bench${Date.now()}`;
  const queue = new Queue(qname, { connection: { host: '127.0.0.1', port: redis.port } });
  try {
    await queue.waitUntilReady();
    const base = Date.now() + 3600_000; // due in 1 h: nothing fires
    const enqueueS = await enqueue(queue, a.n, a.chunk, i => base + i);
    const count = await queue.getDelayedCount();
    const client = new IORedis({ host: '127.0.0.1', port: redis.port });
    const mem = (await client.info('memory')).match(/used_memory:(\d+)/)[1];
    client.disconnect();
    return {
      bench: 'bullmq_enqueue', scenario: 'enqueue', n: a.n, hz: a.hz, chunk: a.chunk, run,
      enqueue_s: Math.round(enqueueS * 1000) / 1000,
      enqueue_jobs_per_s: Math.round(a.n / enqueueS),
      delayed_count: count, redis_used_memory_mb: Math.round(Number(mem) / 1048576),
    };
  } finally {
    await queue.close().catch(() => {});
    await redis.stop();
  }
}

const DEFAULT_MATRIX = [
  { scenario: 'enqueue', n: 100000, chunk: 1000 },
  // (a single addBulk of all 100k: --scenario enqueue --chunk 100000; same speed within noise)
  { scenario: 'spread', n: 1000, hz: 10 },
  { scenario: 'spread', n: 1000, hz: 100 },
  { scenario: 'spread', n: 100000, hz: 10 },
  { scenario: 'spread', n: 100000, hz: 100 },
  { scenario: 'spread', n: 100000, hz: 10, spread: 10 },
  { scenario: 'spread', n: 100000, hz: 100, spread: 10 },
  { scenario: 'burst', n: 50000, hz: 10 },
  { scenario: 'burst', n: 50000, hz: 100 },
];

// smaller matrix, used for the BullMQ 5.x comparison run
const CORE_MATRIX = [
  { scenario: 'enqueue', n: 100000, chunk: 1000 },
  { scenario: 'spread', n: 1000, hz: 10 },
  { scenario: 'spread', n: 1000, hz: 100 },
  { scenario: 'spread', n: 100000, hz: 10, spread: 10 },
  { scenario: 'burst', n: 50000, hz: 10 },
];

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const matrix = a.scenario
    ? [{ scenario: a.scenario, n: a.n ?? (a.scenario === 'spread' ? 1000 : a.scenario === 'burst' ? 50000 : 100000) }]
    : a.matrix === 'core' ? CORE_MATRIX : DEFAULT_MATRIX;
  ({ Queue } = await import(a.pkg));
  const pkgDir = path.join(here, 'node_modules', a.pkg);
  const ioredisVersion = (() => { try { return pkgVersion('ioredis', pkgDir); } catch { return pkgVersion('ioredis'); } })();
  const meta = { bullmq: pkgVersion(a.pkg), ioredis: ioredisVersion, node: process.version, redis_version: redisVersion() };
  for (const m of matrix) {
    const cfg = { ...a, ...m };
    for (let run = 1; run <= a.runs; run++) {
      const out = cfg.scenario === 'enqueue' ? await runEnqueue(cfg, run) : await runDelayed(cfg, run);
      console.log(JSON.stringify({ ...out, ...meta }));
    }
  }
}

main().then(() => process.exit(0), err => { console.error(err); process.exit(1); });
