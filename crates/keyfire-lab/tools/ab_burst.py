#!/usr/bin/env python3
"""Alternated A/B runs of `keyfire bench burst`: node CPU and Redis time per firing of two
builds, pair by pair (old, new, old, new, ...), with the figures that say how far the
machine's noise lets a comparison go.

On a shared machine one run's CPU per firing moves by tens of percent with the load of the
hour, and it moves both builds alike only when they run back to back. So each pair is one run
of each build, in turn, and the comparison is made on the pairs' ratios (new / old):
their range, median and mean with a 95 % interval for the mean (normal approximation), the
ratio of the summed figures, and how many pairs are at or under `--under`.

usage: ab_burst.py [--pairs 10] [--n 50000] [--under 0.5] [--log FILE] OLD_BIN NEW_BIN
       (extra arguments after `--` go to `bench burst`)
needs: redis-server (>= 7) on PATH, as `keyfire bench` does.
"""
import argparse, json, statistics, subprocess, sys, tempfile

FIELDS = ('node_cpu_usec_per_firing', 'redis_usec_per_firing', 'firings_per_s', 'missed',
          'doubled')


def run(binary, n, extra):
    """One `bench burst`: its report's figures, or None if it printed no report."""
    out = subprocess.run([binary, 'bench', 'burst', '--n', str(n), *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         cwd=tempfile.gettempdir()).stdout
    start = out.find('{')
    if start < 0:
        return None
    report = json.loads(out[start:])
    return {f: report.get(f) for f in FIELDS}


def summary(ratios, under):
    """The pairs' ratios as the text lines of the summary."""
    mean = statistics.mean(ratios)
    lines = [f'ratios: {" ".join(f"{r:.2f}" for r in ratios)}',
             f'min {min(ratios):.2f}, max {max(ratios):.2f}, '
             f'median {statistics.median(ratios):.3f}, mean {mean:.3f}']
    if len(ratios) > 1:
        half = 1.96 * statistics.stdev(ratios) / len(ratios) ** 0.5
        lines.append(f'mean 95% interval [{mean - half:.3f}, {mean + half:.3f}]')
    lines.append(f'at or under {under}: {sum(r <= under for r in ratios)} of {len(ratios)}')
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--pairs', type=int, default=10)
    ap.add_argument('--n', type=int, default=50_000)
    ap.add_argument('--under', type=float, default=0.5,
                    help='count the pairs whose node CPU ratio is at or under this')
    ap.add_argument('--log', help='append every run\'s figures here, a JSON line each')
    ap.add_argument('old')
    ap.add_argument('new')
    ap.add_argument('extra', nargs='*', help='after --: more arguments for bench burst')
    a = ap.parse_args()
    pairs = []
    for i in range(a.pairs):
        pair = []
        for name, binary in (('old', a.old), ('new', a.new)):
            r = run(binary, a.n, a.extra)
            if r is None:
                sys.exit(f'{binary}: bench burst printed no report')
            pair.append(r)
            if a.log:
                with open(a.log, 'a') as f:
                    f.write(json.dumps({'pair': i + 1, 'build': name, 'bin': binary, **r}) + '\n')
        old, new = pair
        ratio = new['node_cpu_usec_per_firing'] / old['node_cpu_usec_per_firing']
        print(f'pair {i + 1}: node µs {old["node_cpu_usec_per_firing"]:.2f} -> '
              f'{new["node_cpu_usec_per_firing"]:.2f} ({ratio:.2f}x), Redis µs '
              f'{old["redis_usec_per_firing"]:.2f} -> {new["redis_usec_per_firing"]:.2f}, '
              f'missed {old["missed"]}/{new["missed"]}, doubled {old["doubled"]}/{new["doubled"]}',
              flush=True)
        pairs.append((old, new))
    node = [n['node_cpu_usec_per_firing'] / o['node_cpu_usec_per_firing'] for o, n in pairs]
    redis = [n['redis_usec_per_firing'] / o['redis_usec_per_firing'] for o, n in pairs]
    total = lambda side, f: sum(p[side][f] for p in pairs)
    print('node CPU per firing, new / old:')
    for line in summary(node, a.under):
        print('  ' + line)
    print(f'  summed: {total(1, FIELDS[0]) / total(0, FIELDS[0]):.3f}')
    print(f'Redis µs per firing, new / old: median {statistics.median(redis):.3f}, '
          f'summed {total(1, FIELDS[1]) / total(0, FIELDS[1]):.3f}')
    print(f'missed {total(0, "missed")}/{total(1, "missed")}, '
          f'doubled {total(0, "doubled")}/{total(1, "doubled")} (old/new)')


if __name__ == '__main__':
    sys.exit(main())
