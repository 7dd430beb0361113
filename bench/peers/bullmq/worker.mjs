// Child process: one BullMQ Worker with a no-op processor that records
// lateness = processing start - job.data.due  (due = enqueue timestamp + delay).
// Config comes as a JSON string in argv[2]; results go back to the parent over IPC.
const cfg = JSON.parse(process.argv[2]);
// cfg.pkg: 'bullmq' (6.x, latest) or 'bullmq5' (npm alias of the latest 5.x)
const { Worker } = await import(cfg.pkg || 'bullmq');
const expected = cfg.n;
const lat = new Float64Array(expected);
let started = 0;
let doubled = 0; // jobs handed to the processor more than once
const seen = new Set();
let completed = 0;
let firstStart = 0;
let lastStart = 0;
let lastCompleted = 0;
let sent = false;
let cpuMark = null; // process.cpuUsage() when the parent says the first job is due

const worker = new Worker(
  cfg.queue,
  async job => {
    const t = Date.now();
    if (started < expected) lat[started] = t - job.data.due;
    if (started === 0) firstStart = t;
    lastStart = t;
    started++;
    if (seen.has(job.id)) doubled++;
    else seen.add(job.id);
  },
  {
    connection: { host: '127.0.0.1', port: cfg.port, maxRetriesPerRequest: null },
    concurrency: cfg.concurrency,
    autorun: true,
  },
);

worker.on('completed', () => {
  completed++;
  if (completed >= expected && !sent) {
    lastCompleted = Date.now();
    sent = true;
    const cpu = cpuMark ? process.cpuUsage(cpuMark) : null;
    const workerCpuMs = cpu ? (cpu.user + cpu.system) / 1000 : null;
    process.send({ type: 'done', lat: Array.from(lat.subarray(0, Math.min(started, expected))), started, completed, doubled, firstStart, lastStart, lastCompleted, workerCpuMs });
  }
});
worker.on('error', err => process.send({ type: 'error', message: String(err && err.stack || err) }));

process.on('message', async msg => {
  if (msg.type === 'mark') {
    cpuMark = process.cpuUsage();
  } else if (msg.type === 'report') {
    // partial report (timeout case)
    process.send({ type: 'partial', lat: Array.from(lat.subarray(0, Math.min(started, expected))), started, completed, doubled, firstStart, lastStart, lastCompleted: Date.now() });
  } else if (msg.type === 'close') {
    const t = setTimeout(() => process.exit(0), 5000);
    try { await worker.close(true); } catch { /* ignore */ }
    clearTimeout(t);
    process.exit(0);
  }
});

await worker.waitUntilReady();
// give the blocking connection a moment to enter BZPOPMIN
setTimeout(() => process.send({ type: 'ready' }), 200);
