// Start/stop a private redis-server on a free loopback port (6390-6399).
// Stopped by the PID we spawned, never by name.
import { spawn, execFileSync } from 'node:child_process';
import { copyFileSync, readFileSync } from 'node:fs';
import net from 'node:net';

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

// user+system CPU milliseconds consumed so far by process `pid` (from /proc)
export function procCpuMs(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(')').pop().trim().split(/\s+/);
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
}

const REDIS_SERVER = process.env.REDIS_SERVER || '/usr/bin/redis-server';

// servers started by this process: stopped (by PID) on exit / SIGTERM / SIGINT
const started = new Set();
process.on('exit', () => { for (const p of started) { try { p.kill('SIGTERM'); } catch { /* gone */ } } });
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(128 + (sig === 'SIGTERM' ? 15 : 2)));

function probe(port) {
  // resolves true if something accepts connections on port
  return new Promise(resolve => {
    const s = net.createConnection({ host: '127.0.0.1', port });
    s.setTimeout(300);
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
    s.once('timeout', () => { s.destroy(); resolve(false); });
  });
}

function canBind(port) {
  return new Promise(resolve => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

async function pickPort() {
  for (let p = 6390; p < 6400; p++) {
    if (!(await probe(p)) && (await canBind(p))) return p;
  }
  throw new Error('no free port in 6390-6399');
}

function ping(port) {
  return new Promise(resolve => {
    const s = net.createConnection({ host: '127.0.0.1', port });
    s.setTimeout(500);
    s.once('connect', () => s.write('PING\r\n'));
    s.once('data', d => { s.destroy(); resolve(d.toString().startsWith('+PONG')); });
    s.once('error', () => resolve(false));
    s.once('timeout', () => { s.destroy(); resolve(false); });
  });
}

export function redisVersion() {
  const out = execFileSync(REDIS_SERVER, ['--version']).toString();
  const m = out.match(/v=(\S+)/);
  return m ? m[1] : out.trim();
}

// conf: a redis.conf to start from (keyfire's shipped one for keyfire's side); the
// arguments after it override it, persistence off included.
export async function startRedis({ hz = 10, conf = null, extra = [] } = {}) {
  const port = await pickPort();
  // A copy beside its log: never started from the checkout's file, which keyfire's build embeds.
  const copy = conf ? `/tmp/peers-redis-${port}.conf` : null;
  if (copy) copyFileSync(conf, copy);
  const args = [...(copy ? [copy] : []), '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
    '--daemonize', 'no', '--hz', String(hz), '--dir', '/tmp', '--dbfilename', `peers-${port}.rdb`,
    '--logfile', `/tmp/peers-redis-${port}.log`, ...extra];
  const proc = spawn(REDIS_SERVER, args, { stdio: 'ignore' });
  started.add(proc);
  let exited = false;
  proc.once('exit', () => { exited = true; started.delete(proc); });
  const deadline = Date.now() + 10000;
  while (!(await ping(port))) {
    if (exited) throw new Error(`redis-server exited early, see /tmp/peers-redis-${port}.log`);
    if (Date.now() > deadline) { proc.kill('SIGTERM'); throw new Error('redis did not answer PING'); }
    await new Promise(r => setTimeout(r, 50));
  }
  const stop = async () => {
    if (exited) return;
    const done = new Promise(r => proc.once('exit', r));
    proc.kill('SIGTERM');
    const t = setTimeout(() => { if (!exited) proc.kill('SIGKILL'); }, 10000);
    await done;
    clearTimeout(t);
  };
  return { port, pid: proc.pid, stop };
}

// nearest-rank percentiles
export function summarize(vals) {
  const v = Float64Array.from(vals).sort();
  const n = v.length;
  const pct = p => (n ? v[Math.max(0, Math.min(n - 1, Math.ceil((p / 100) * n) - 1))] : null);
  const r = x => (x === null || x === undefined ? null : Math.round(x * 10) / 10);
  let sum = 0;
  for (const x of v) sum += x;
  return {
    count: n,
    min_ms: n ? r(v[0]) : null,
    p50_ms: r(pct(50)),
    p90_ms: r(pct(90)),
    p99_ms: r(pct(99)),
    max_ms: n ? r(v[n - 1]) : null,
    mean_ms: n ? r(sum / n) : null,
  };
}
