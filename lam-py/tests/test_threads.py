"""Sessions admitted from several Python threads at once give the digests of a sequential run."""

import sys
import threading
import time

import lam
from conftest import EXAMPLES
from test_parity import CORPUS_GLOBS, smallest


def trajectories(corpus):
    paths = [smallest(corpus, g) for g in CORPUS_GLOBS] + [EXAMPLES / "edit-session.jsonl"]
    return [t for p in paths for t in lam.read_trajectories(p)]


def run(t):
    s = lam.Session(encoder="hashing", cache=False)
    res = [s.admit(r.action, r.observation).residual_bytes for r in t.records]
    return s.digest, res


def test_threads_match_sequential(corpus):
    trajs = trajectories(corpus) * 2  # two sessions per trajectory, all at once
    sequential = [run(t) for t in trajs]
    results = [None] * len(trajs)
    errors = []
    start = threading.Barrier(len(trajs))

    def work(i):
        try:
            start.wait()
            results[i] = run(trajs[i])
        except BaseException as e:  # reported below, never swallowed
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(trajs))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert results == sequential
    assert len({d for d, _ in sequential}) > 1  # the trajectories differ


def test_one_session_shared_by_threads_takes_turns():
    # Admissions from several threads into one session are serialised, never torn.
    recs = lam.read_trajectory(EXAMPLES / "edit-session.jsonl")
    s = lam.Session(encoder="hashing", cache=False)
    errors = []

    def work(chunk):
        try:
            for r in chunk:
                s.admit(r.action, r.observation)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(recs[i::4],)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and s.records == len(recs) and len(set(s.ids)) <= len(recs)


def test_bad_argument_in_a_thread_is_an_exception():
    s = lam.Session(encoder="hashing", cache=False)
    caught = []

    def work():
        try:
            s.admit("ls", object())
        except TypeError as e:
            caught.append(str(e))

    th = threading.Thread(target=work)
    th.start()
    th.join()
    assert caught and "observation" in caught[0]


def test_the_gil_is_released_while_admitting():
    # A Python thread keeps running while another thread is inside admit():
    # were the GIL held for the whole call, it could not run at all between
    # the first switch interval after the call began and the call's end.
    big = "".join(f"{i:08x} {i * 2654435761 % 4294967296:08x} {'word%d' % (i % 977)}\n" for i in range(120_000))
    s = lam.Session(encoder="hashing", cache=False, count_tokens=False)
    seen = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            seen.append(time.perf_counter())
            time.sleep(0)

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    th = threading.Thread(target=spin)
    th.start()
    try:
        while not seen:
            time.sleep(0.001)
        t0 = time.perf_counter()
        a = s.admit("cat big.log", big)
        t1 = time.perf_counter()
    finally:
        stop.set()
        th.join()
        sys.setswitchinterval(old)
    assert a.bytes_in == len(big)
    assert t1 - t0 > 0.05, "the admission is long enough to tell"
    inside = [t for t in seen if t0 + 0.02 < t < t1]
    assert len(inside) > 10, (len(inside), t1 - t0)
