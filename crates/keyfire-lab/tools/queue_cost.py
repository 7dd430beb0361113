#!/usr/bin/env python3
"""Redis instructions per task of the delay queue's scripts: add, promote, pop and finish, as
`keyfire bench queue` drives them, counted by callgrind (a figure the machine's noise cannot
move, where timings drift by tens of percent).

Starts its own redis-server under valgrind's callgrind on a free port (script_cost.py's
`Server`), then per run: adds `n` tasks to one topic with the real add.lua in calls of 500
(due a few seconds ahead: delayed, so that promote.lua makes them ready once it passed),
promotes them, pops them with pop.lua in calls of `--pop` with as many candidates as a
consumer reads (twice the batch), and finishes them with finish.lua in calls of `--pop`. Each
phase's instructions are zeroed before it and dumped after. Several `--src` trees (each
holding `queue/lua` and `store/lua`, as `crates/keyfire/src` does) run in turn, alternated
`--runs` times, so two versions compare in one server.

usage: queue_cost.py [--n 2000] [--pop 100] [--runs 2] [--src DIR ...]
needs: redis-server (>= 7), valgrind, and Python's `redis` package (pip install redis).
"""
import argparse, importlib.util, os, shutil, sys, time, uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, '..', '..', 'keyfire', 'src')
P = '{q}'  # one hash tag: one shard

_spec = importlib.util.spec_from_file_location('script_cost', os.path.join(HERE, 'script_cost.py'))
script_cost = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script_cost)


def keys(*names):
    return [f'{P}:q:{n}' for n in names]


def run(srv, src, n, pop):
    """Instructions per task of each phase, with the scripts under `src`."""
    r = srv.r
    r.flushall()
    lua = lambda path: open(os.path.join(src, path)).read()

    def load(path, lib=None):
        # A library prepended, the script's flags line first (as the store loads them); a
        # library a tree does not have (an older one) is left out.
        text = lua(path)
        if lib is None or not os.path.exists(os.path.join(src, lib)):
            return r.register_script(text)
        head, _, body = text.partition('\n')
        if head.startswith('#!'):
            return r.register_script(head + '\n' + lua(lib) + body)
        return r.register_script(lua(lib) + text)

    add = load('queue/lua/add.lua', 'queue/lua/text_lib.lua')
    promote = load('queue/lua/promote.lua')
    pop_lua = load('queue/lua/pop.lua', 'queue/lua/text_lib.lua')
    finish = load('queue/lua/finish.lua', 'store/lua/fanin_lib.lua')
    ids = [f't{i:05}' for i in range(n)]
    task = lambda i: f'{P}:q:task:{i}'
    out = {}

    redis_ms = lambda: (lambda t: t[0] * 1000 + t[1] // 1000)(r.time())
    # Due at one instant a few seconds ahead (all delayed, however slow valgrind is), then
    # promoted once it passed.
    due = redis_ms() + 5000
    srv.zero()
    for s in range(0, n, 500):
        part = ids[s:s + 500]
        args = ['bench', 1000, 'changes', 'bench']
        for i in part:
            args += [i, '{"n":1}', '', '', 'at', due, '', '']
        rep = add(keys=keys('delayed:bench', 'ready:bench', 'notify:bench', 'stats:bench', 'next', 'due')
                  + [task(i) for i in part], args=args)
        assert rep[1] == 1, rep[:4]
    out['add'] = srv.dump() / n
    assert r.zcard(f'{P}:q:delayed:bench') == n, 'the adds took longer than the delay'
    while redis_ms() <= due:
        time.sleep(0.1)

    srv.zero()
    moved = 0
    while moved < n:
        rep = promote(keys=keys('delayed:bench', 'ready:bench', 'notify:bench', 'next', 'reserved:bench',
                                'due', 'stats:bench'), args=[1000, 1000, 'bench'])
        assert rep[0] > 0, rep
        moved += rep[0]
    out['promote'] = srv.dump() / n

    srv.zero()
    tokens = {}
    left = list(ids)
    while left:
        cand = left[:2 * pop]
        args = [pop, 5, 30000, 'bench', 0]
        for i in cand:
            args += [i, uuid.uuid4().hex + '.bench']
        rep = pop_lua(keys=keys('ready:bench', 'reserved:bench', 'notify:bench', 'stats:bench', 'due')
                      + [task(i) for i in cand], args=args)
        taken = rep[0]
        assert taken > 0, rep[:5]
        for j in range(taken):
            at = 5 + 10 * j
            tokens[rep[at].decode()] = rep[at + 7].decode()
        left = left[taken:]
    out['pop'] = srv.dump() / n

    srv.zero()
    for s in range(0, n, pop):
        part = ids[s:s + pop]
        args = [7 * 86_400_000]
        for i in part:
            args += [i, tokens[i]]
        rep = finish(keys=keys('reserved:bench', 'stats:bench') + [task(i) for i in part], args=args)
        assert all(c == 1 for c in rep[1:]), rep[:4]
    out['finish'] = srv.dump() / n
    assert r.zcard(f'{P}:q:reserved:bench') == 0 and r.zcard(f'{P}:q:ready:bench') == 0
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--src', action='append',
                    help='a tree of the scripts (queue/lua, store/lua); default: this checkout\'s')
    ap.add_argument('--n', type=int, default=2000)
    ap.add_argument('--pop', type=int, default=100, help='tasks per pop and per finish call')
    ap.add_argument('--runs', type=int, default=2)
    a = ap.parse_args()
    for tool in ('valgrind', 'callgrind_control', 'redis-server'):
        if not shutil.which(tool):
            raise SystemExit(f'{tool} is not on PATH')
    srcs = a.src or [SRC]
    srv = script_cost.Server()
    try:
        for k in range(a.runs):
            for src in srcs:
                c = run(srv, src, a.n, a.pop)
                total = sum(c.values())
                print(f"{src}: add {c['add']:7.0f}  promote {c['promote']:6.0f}  pop {c['pop']:7.0f}  "
                      f"finish {c['finish']:6.0f}  total {total:7.0f} instructions per task", flush=True)
    finally:
        srv.close()


if __name__ == '__main__':
    sys.exit(main())
