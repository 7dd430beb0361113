#!/usr/bin/env python3
"""The nodes' instructions per firing in `keyfire bench burst`: the node side's cost as a
figure the machine's noise cannot move (its CPU time per firing drifts by tens of percent).

Runs `BIN bench burst --n N` under valgrind's callgrind. The bench runs its nodes in its own
process, so that process's instructions are the nodes' plus the bench's driver (its
recording handler and its INFO polls, a few percent). Callgrind dumps its counts each time
the bench takes a snapshot (`Harness::snapshot`); the measured phase, from the snapshot just
before the instant to the one after the last outcome is recorded, is the dumps from the
second up to the largest. The bench's redis-server runs under valgrind too (`--tool=none`,
counting nothing) and the nodes' liveness timings and timer horizon are stretched
(`KEYFIRE_BENCH_SLOWDOWN`), so that the slowed nodes batch their claims and outcomes and read
the burst's firings ahead much as they do natively, and no node fences itself. Repeat runs
agree within a few percent, except one where the slowed nodes fell behind (it shows as more
Redis commands per firing); the batches follow timing.

usage: node_cost.py [--n 10000] [--runs 3] [--keep DIR] BIN [BIN ...]
       (binaries alternated run by run; prints each run and each binary's median)
needs: valgrind, and redis-server (>= 7) on PATH.
"""
import argparse, glob, json, os, re, shutil, statistics, subprocess, sys, tempfile


def count(binary, n, out, redis_tool, stretch):
    """One run: (instructions per firing, the bench's report)."""
    wrap = os.path.join(out, 'bin')
    os.makedirs(wrap, exist_ok=True)
    server = os.path.join(wrap, 'redis-server')
    with open(server, 'w') as f:
        f.write('#!/bin/sh\nexec valgrind %s -q %s "$@"\n' % (redis_tool, shutil.which('redis-server')))
    os.chmod(server, 0o755)
    env = dict(os.environ, PATH=wrap + os.pathsep + os.environ['PATH'])
    if stretch > 1:
        env['KEYFIRE_BENCH_SLOWDOWN'] = str(stretch)
    with open(os.path.join(out, 'report.json'), 'w') as report, \
            open(os.path.join(out, 'stderr.txt'), 'w') as err:
        subprocess.run(
            ['valgrind', '--tool=callgrind', '--compress-strings=no', '--compress-pos=no',
             '--dump-before=keyfire_lab::bench::harness::Harness::snapshot::*',
             '--callgrind-out-file=' + os.path.join(out, 'cg.%p'),
             binary, 'bench', 'burst', '--n', str(n)],
            stdout=report, stderr=err, env=env)
    parts = []
    for path in glob.glob(os.path.join(out, 'cg.*')):
        m = re.search(r'cg\.\d+(?:\.(\d+))?$', path)
        part = int(m.group(1)) if m.group(1) else 1 << 30  # the last: at the process's end
        with open(path, errors='replace') as f:
            total = next(int(l.split()[1]) for l in f if l.startswith('totals:'))
        parts.append((part, total))
    parts.sort()
    if len(parts) < 3:
        sys.exit('no dump at the snapshots: Harness::snapshot was inlined (build without fat LTO, '
                 'as docs/benchmarks.md says)')
    big = max(range(1, len(parts)), key=lambda i: parts[i][1])
    measured = sum(t for _, t in parts[1:big + 1])
    with open(os.path.join(out, 'report.json')) as f:
        lines = f.read().strip().splitlines()
    if not lines:
        return None, None
    rep = json.loads(lines[-1])
    return measured / max(rep['firings'], 1), rep


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--n', type=int, default=10_000)
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--redis-slow', action='store_true',
                    help='run redis-server under callgrind (counting nothing) rather than '
                         '--tool=none: slower, closer to the nodes\' slowdown')
    ap.add_argument('--stretch', type=int, default=1,
                    help='KEYFIRE_BENCH_SLOWDOWN for the bench (default: none): on a loaded '
                         'machine, keeps slowed nodes from fencing themselves')
    ap.add_argument('--keep', help='keep the callgrind dumps here (default: deleted)')
    ap.add_argument('bins', nargs='+')
    a = ap.parse_args()
    root = a.keep or tempfile.mkdtemp(prefix='node-cost-')
    per = {b: [] for b in a.bins}
    for r in range(a.runs):
        for i, b in enumerate(a.bins):
            out = os.path.join(root, f'{i}-{r}')
            tool = ('--tool=callgrind --collect-atstart=no --callgrind-out-file=/dev/null'
                    if a.redis_slow else '--tool=none')
            ipf, rep = count(b, a.n, out, tool, a.stretch)
            if rep is None:
                print(f'{b} run {r + 1}: the bench failed (see {out}/stderr.txt)', flush=True)
                continue
            with open(os.path.join(out, 'stderr.txt'), errors='replace') as f:
                fenced = 'fencing this node' in f.read()
            if fenced:
                print(f'{b} run {r + 1}: a node fenced itself; not counted (see --stretch)')
                continue
            per[b].append(ipf)
            print(f'{b} run {r + 1}: {ipf:,.0f} instructions per firing; '
                  f'{rep.get("redis_commands_per_firing")} Redis commands per firing; '
                  f'missed {rep["missed"]}, doubled {rep["doubled"]}', flush=True)
    for b, v in per.items():
        if not v:
            continue
        print(f'{b}: median {statistics.median(v):,.0f} instructions per firing '
              f'({", ".join(f"{x:,.0f}" for x in v)})')
    if not a.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
