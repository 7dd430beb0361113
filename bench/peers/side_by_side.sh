#!/usr/bin/env bash
# keyfire's bench beside BullMQ's on the same machine, alternated pair by pair, Redis 7 with hz 100
# for both (keyfire's redis.conf ships hz 100). Prints one JSON line per run and a ratio table.
#
#   cargo build --release --bin keyfire
#   bench/peers/side_by_side.sh [ROUNDS] [PAIRS...]      # from anywhere in the checkout
#
#   PAIRS: burst queue steady sparse enqueue consumers (default: all)
#
# BullMQ's side: one Worker process (concurrency 100, no-op processor) and a producer
# (Queue.addBulk); lateness = processing start minus the job's due time. Its "burst" is the
# same flow as keyfire's delay queue: delayed jobs become ready, a worker takes, runs and
# completes them; so keyfire's `queue` pair is measured against it.
#
# `consumers`: 20,000 tasks due at one instant, delayed -> taken -> done, consumed by a process
# in another language: keyfire's delay queue popped and finished over REST by a Python (httpx)
# and a Node (fetch) consumer, beside BullMQ's own Python Worker (bullmq on PyPI) and Node
# Worker. Rows `consumers-node` and `consumers-python`; see consumers/bench.mjs.
#
# Peers come from the package registries at the pinned versions: bullmq/package-lock.json
# (npm ci) and consumers/requirements.txt (pip, into consumers/.venv). KEYFIRE_BIN overrides
# the keyfire binary. Each run's stderr goes to a log beside the JSON lines.
set -u
rounds=${1:-1}; shift || true
pairs=${*:-burst queue steady sparse enqueue consumers}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root" || exit 1
kf=${KEYFIRE_BIN:-$root/target/release/keyfire}
[ -x "$kf" ] || { echo "no $kf: run cargo build --release --bin keyfire first" >&2; exit 1; }
export KEYFIRE_BIN=$kf
for p in $pairs; do
  case $p in burst|queue|steady|sparse|enqueue|consumers) ;;
    *) echo "unknown pair '$p' (burst queue steady sparse enqueue consumers)" >&2; exit 2 ;; esac
done
case " $pairs " in *" consumers "*) with_consumers=1 ;; *) with_consumers=0 ;; esac

# Install the peers when missing or when their pins changed (a stamp holds the pins installed).
bq="$here/bullmq"
if ! cmp -s "$bq/package-lock.json" "$bq/node_modules/.peers-installed-lock"; then
  (cd "$bq" && npm ci --no-audit --no-fund >&2) || { echo "npm ci failed in $bq" >&2; exit 1; }
  cp "$bq/package-lock.json" "$bq/node_modules/.peers-installed-lock"
fi
venv="$here/consumers/.venv"
if [ "$with_consumers" = 1 ] && ! cmp -s "$here/consumers/requirements.txt" "$venv/.peers-installed-requirements"; then
  { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet -r "$here/consumers/requirements.txt" >&2; } ||
    { echo "could not install consumers/requirements.txt into $venv" >&2; exit 1; }
  cp "$here/consumers/requirements.txt" "$venv/.peers-installed-requirements"
fi

out=$(mktemp /tmp/side-by-side-XXXX.jsonl)
log=${out%.jsonl}.log
tag() { python3 -c "import json,sys
for l in sys.stdin:
    if l.startswith('{'): d=json.loads(l); d.update(system='$1', pair='$2'); print(json.dumps(d))"; }
k() { local p=$1; shift; timeout 600 "$kf" bench "$@" 2>>"$log" | tail -1 | tag keyfire "$p" | tee -a "$out"; }
b() { local p=$1; shift; (cd "$bq" && timeout 600 node bench.mjs --runs 1 --hz 100 "$@" 2>>"$log") | tail -1 | tag bullmq "$p" | tee -a "$out"; }
# c SYSTEM LANG: one run of consumers/bench.mjs (20,000 due at one instant)
c() { (cd "$here/consumers" && timeout 900 node bench.mjs --system "$1" --lang "$2" --n 20000 --hz 100 2>>"$log") | tail -1 | tag "$1" "consumers-$2" | tee -a "$out"; }
for r in $(seq "$rounds"); do
  for p in $pairs; do
    case $p in
      burst)   k burst burst --n 50000;               b burst --scenario burst --n 50000 --concurrency 100 ;;
      queue)   b queue --scenario burst --n 20000 --concurrency 100; k queue queue --n 20000 --duration 0s ;;
      steady)  k steady steady;                        b steady --scenario spread --n 100000 --spread 10 --concurrency 100 ;;
      sparse)  b sparse --scenario spread --n 1000 --spread 10 --pending 1000000 --concurrency 100; k sparse sparse ;;
      enqueue) k enqueue enqueue --n 300000;           b enqueue --scenario enqueue --n 100000 --chunk 1000 ;;
      consumers)
        b consumers-node --scenario burst --n 20000 --concurrency 100; c keyfire node
        c bullmq python; c keyfire python ;;
    esac
  done
done
python3 - "$out" "$log" <<'PY'
import json, sys, collections
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for l in open(sys.argv[1]):
    d = json.loads(l); rows[d['pair']][d['system']].append(d)
def rate(d):
    if d.get('bench') == 'consumers':
        return d.get('tasks_per_s')
    if d['system'] == 'keyfire':
        return d.get('tasks_per_s') if d['pair'] == 'enqueue' else d.get('firings_per_s')
    if d['pair'] == 'enqueue':
        return d.get('enqueue_jobs_per_s')
    return d.get('throughput_jobs_per_s') or d.get('effective_jobs_per_s')
def p99(d): return d.get('lateness_p99_ms', d.get('p99_ms'))
def bad(d): return f"{d.get('missed', d.get('lost', 0))}/{d.get('doubled', 0)}"
# Redis CPU from the first due instant to the last job done, % of one core: keyfire's
# cpu_pct_redis_firing, BullMQ's redis_cpu_pct (the same span).
def cpu(d):
    v = d.get('cpu_pct_redis_firing') if d['system'] == 'keyfire' else d.get('redis_cpu_pct')
    return '-' if v is None else f"{v:.0f}"
def cmds(d):
    v = d.get('redis_commands_per_task') or d.get('redis_commands_per_firing')
    return '-' if v is None else f"{v:.1f}"
print(f"{'pair':16} {'keyfire/s':>10} {'bullmq/s':>10} {'ratio':>6} {'kf p99 ms':>10} {'bq p99 ms':>10} {'kf/bq redis %':>14} {'kf cmds':>8} {'lost/doubled kf, bq':>20}")
for p, s in rows.items():
    for kd, bd in zip(s.get('keyfire', []), s.get('bullmq', [])):
        kr, br = rate(kd) or 0, rate(bd) or 0
        print(f"{p:16} {kr:>10.0f} {br:>10.0f} {kr / br if br else 0:>6.2f} {str(p99(kd)):>10} {str(p99(bd)):>10} {cpu(kd) + ' / ' + cpu(bd):>14} {cmds(kd) if p != 'enqueue' else '-':>8} {bad(kd) + ', ' + bad(bd):>20}")
print('lines:', sys.argv[1], ' stderr:', sys.argv[2])
PY
