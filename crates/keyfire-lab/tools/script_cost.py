#!/usr/bin/env python3
"""Redis instructions per firing of the firing path's scripts: a cost figure the machine's
noise cannot move (alternated timings here drift by tens of percent; this by about 1 %).

Starts its own redis-server under valgrind's callgrind on a free port, writes jobs with the
real insert.lua, then drives claim.lua and complete.lua in batches of 20 as a node does,
and counts the instructions Redis executes for each phase (callgrind_control zeroes the
counters before a phase and dumps them after). Two workloads:
  cron  every-second jobs, measured on their second firing (a run before it, so the claim
        checks the latest run and the completion trims an existing history), claimed by
        their owner, which arms the next firing's timer itself (`--announce`: claimed by
        another node, so the claim announces the next firing on the change channel);
  task  one-shot tasks (compact records expanded by their claim).

usage: script_cost.py [--lua DIR] [--n 2000] [--batch 20] [--announce] [cron|task ...]
needs: redis-server (>= 7), valgrind, and Python's `redis` package (pip install redis).
"""
import argparse, glob, json, os, shutil, socket, subprocess, sys, tempfile, time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
LUA = os.path.join(HERE, '..', '..', 'keyfire', 'src', 'store', 'lua')
P = '{k}'  # one hash tag: one shard


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Server:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix='script-cost-')
        self.port = free_port()
        self.proc = subprocess.Popen(
            ['valgrind', '--tool=callgrind', f'--callgrind-out-file={self.dir}/cg.%p',
             'redis-server', '--port', str(self.port), '--save', '', '--appendonly', 'no',
             '--dir', self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.r = redis.Redis(port=self.port)
        for _ in range(300):
            try:
                if self.r.ping():
                    # Our own server: the one we started answers with our pid's children.
                    return
            except redis.ConnectionError:
                time.sleep(0.1)
        raise SystemExit('redis-server under valgrind did not start')

    def zero(self):
        subprocess.run(['callgrind_control', '-z', str(self.proc.pid)], capture_output=True, check=True)

    def dump(self):
        subprocess.run(['callgrind_control', '-d', str(self.proc.pid)], capture_output=True, check=True)
        newest = max(glob.glob(f'{self.dir}/cg.*'), key=os.path.getmtime)
        for line in open(newest):
            if line.startswith(('summary:', 'totals:')):
                return int(line.split()[1])
        raise SystemExit(f'no totals in {newest}')

    def close(self):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def run(srv, lua, kind, n, batch, announce):
    r = srv.r
    r.flushall()
    script = lambda name: r.register_script(open(os.path.join(lua, f'{name}.lua')).read())
    insert, claim, complete = script('insert'), script('claim'), script('complete')
    once = kind == 'task'
    bucket = lambda i: f'{P}:tasks:{int(i[1:]) % 8192}'
    tnow = lambda: (lambda t: t[0] * 1000 + t[1] // 1000)(r.time())
    ids = [f'{kind[0]}{i}' for i in range(n)]
    # Instants in the past (claimable at once, within the misfire tolerance), and for the
    # measured cron round a next firing in the future within the sentinel horizon, sent
    # without its sentinel key as for an every-second job (its owner arms it, or with
    # `announce` the claim announces it), whatever valgrind's pace: the figure does not
    # depend on timing.
    t0 = tnow() - 30_000
    sched = '{"at":"2026-01-01T00:00:00Z"}' if once else '{"cron":"* * * * * *"}'
    for s in range(0, n, 500):
        keys = [f'{P}:due', f'{P}:jobs', f'{P}:gen', f'{P}:tasks:count']
        args = ['changes', str(t0 - 5000), '60000']
        for i in ids[s:s + 500]:
            keys += [f'{P}:job:{i}', f'{P}:fire:{i}:{t0}', bucket(i)]
            spec = '{"id":"%s","schedule":%s,"handler":"noop","params":{"n":7},"retry":{"max_attempts":3}}' % (i, sched)
            args += [i, spec, str(t0), '1' if once else '0']
        insert(keys=keys, args=args)
    gens = {}
    for i in ids:
        if once:
            gens[i] = r.hget(bucket(i), i).decode().split('|')[0] + '.1'
        else:
            g, v = r.hmget(f'{P}:job:{i}', 'gen', 'version')
            gens[i] = f'{g.decode()}.{v.decode()}'
    chunks = [ids[s:s + batch] for s in range(0, n, batch)]
    out = {}
    rounds = 1 if once else 2
    for k in range(rounds):
        measured = k == rounds - 1
        at = t0 + k * 15_000
        nxt = '' if once else str(tnow() + 30_000 if measured else t0 + 15_000)
        claimed = {}
        if measured:
            srv.zero()
        for c in chunks:
            keys = [f'{P}:due', f'{P}:running', f'{P}:jobs', f'{P}:tasks:count']
            args = ['node-1', '30000', 'changes', '60000', '60000' if announce else 'q60000']
            for i in c:
                # Options (see claim.lua): the tolerance alone for a job in the common case;
                # a compact task's bucket key and flags.
                keys += [f'{P}:job:{i}'] + ([bucket(i)] if once else [])
                args += [i, str(at), gens[i], nxt, 't120000' if once else '120000']
            rep = claim(keys=keys, args=args)
            for j, i in enumerate(c):
                assert rep[2 * j] == 1, (i, rep[2 * j:2 * j + 2])
                claimed[i] = rep[2 * j + 1]
        if measured:
            out['claim'] = srv.dump() / n
            srv.zero()
        for c in chunks:
            keys = [f'{P}:running', f'{P}:attempts', f'{P}:retry', f'{P}:done', f'{P}:outbox', f'{P}:outboxh']
            args = ['100', '100', str(7 * 86_400_000)]
            for i in c:
                fid = f'{i}:{at}'
                keys += [f'{P}:job:{i}', f'{P}:runs:{i}']
                rec = json.dumps({'firing_id': fid, 'scheduled_ms': at, 'attempt': 1, 'node': 'node-1',
                                  'claimed_ms': claimed[i], 'started_ms': claimed[i], 'outcome': 'ok'},
                                 separators=(',', ':'))
                # The lease member, the job id, the record (open: no closing brace), and the options of a success.
                args += [f'{fid}|1|{claimed[i]}|node-1', i, rec[:-1], '1' if once else '0']
            rep = complete(keys=keys, args=args)
            assert all(x == b'done' for x in rep[0::2]), rep[:2]
        if measured:
            out['complete'] = srv.dump() / n
    assert r.zcard(f'{P}:running') == 0
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('kinds', nargs='*', default=['cron', 'task'])
    ap.add_argument('--lua', default=LUA)
    ap.add_argument('--n', type=int, default=2000)
    ap.add_argument('--batch', type=int, default=20)
    ap.add_argument('--announce', action='store_true',
                    help='claims announce the next firings (a claim by a node that does not own the job)')
    a = ap.parse_args()
    for tool in ('valgrind', 'callgrind_control', 'redis-server'):
        if not shutil.which(tool):
            raise SystemExit(f'{tool} is not on PATH')
    srv = Server()
    try:
        for kind in a.kinds:
            c = run(srv, a.lua, kind, a.n, a.batch, a.announce)
            print(f"{kind:5} claim {c['claim']:8.0f}  complete {c['complete']:8.0f}  "
                  f"total {c['claim'] + c['complete']:8.0f} instructions per firing")
    finally:
        srv.close()


if __name__ == '__main__':
    sys.exit(main())
