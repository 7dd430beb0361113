"""A consumer that dies mid-batch: run by test_consumer.py, which SIGKILLs it.

Usage: consumer_child.py URL TOKEN TOPIC BATCH FINISH_FIRST

It pops one batch of BATCH tasks, finishes the first FINISH_FIRST of them (each at once), then
prints `blocked <id>,<id>,...` (the ids it holds unfinished) and hangs in its handler.
"""

import sys
import threading

from keyfire_client import Keyfire

url, token, topic, batch, finish_first = sys.argv[1:6]
held: list[str] = []
handled = 0


def handler(task):
    global handled
    handled += 1
    if handled <= int(finish_first):
        return
    held.append(task.id)
    if len(held) == 1:
        # The rest of the batch is still unhandled: report every id this consumer holds.
        print("blocked " + ",".join(t for t in all_ids if t not in finished), flush=True)
        threading.Event().wait()  # until the test kills this process


all_ids: list[str] = []
finished: set[str] = set()
kf = Keyfire(url, token=token)
consumer = kf.consumer(topic, handler, batch=int(batch), wait="10s", flush_interval=0)

# Record what the pop returned and what was finished, to report exactly what is held.
real_pop, real_finish = kf.pop, kf.finish


def pop(*args, **kwargs):
    tasks = real_pop(*args, **kwargs)
    all_ids.extend(t.id for t in tasks)
    return tasks


def finish(topic, tasks):
    tasks = list(tasks)
    outcomes = real_finish(topic, tasks)
    finished.update(i for i, o in outcomes.items() if o == "done")
    return outcomes


kf.pop, kf.finish = pop, finish
print("ready", flush=True)
consumer.run(handle_signals=False)
