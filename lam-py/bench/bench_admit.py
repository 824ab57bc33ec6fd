"""Per-admission cost from Python vs the same admissions in Rust, in one process.

    python lam-py/bench/bench_admit.py [TRAJECTORY...] [--repeat N] [--tokens]

Both sides admit the same records into a fresh session with the same encoder
(the model-free hashing encoder, no cache, so both encode every chunk):
the Rust side times each `lam_operator::Session::admit` call in Rust
(`lam._lam._bench_rust_admit`), the Python side times each `Session.admit`
call from Python (argument conversion, GIL release, the lock, the Admission
object). Prints p50 and mean microseconds per admission and the ratios.
Build the package with the release profile (plain `pip install ./lam-py`)
for numbers worth quoting.
"""

import argparse
import pathlib
import statistics
import time

import lam

REPO = pathlib.Path(__file__).resolve().parents[2]


def python_side(records, tokens):
    s = lam.Session(encoder="hashing", cache=False, count_tokens=tokens)
    out = []
    for r in records:
        action, obs = r.action, r.observation
        t = time.perf_counter_ns()
        s.admit(action, obs)
        out.append(time.perf_counter_ns() - t)
    return out, s.digest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="*", default=[str(REPO / "examples" / "edit-session.jsonl")])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--tokens", action="store_true", help="count cl100k tokens on both sides")
    a = ap.parse_args()
    records = [r for p in a.paths for t in lam.read_trajectories(p) for r in t.records]
    # One session per trajectory file would differ only in what is compared; one long session is fine.
    records = [lam.Record(r.action, r.observation, index=i) for i, r in enumerate(records)]
    rust, py = [], []
    digests = set()
    for _ in range(a.repeat):
        rust += lam._lam._bench_rust_admit(records, 0.95, "hashing", a.tokens)
        t, d = python_side(records, a.tokens)
        py += t
        digests.add(d)
    assert len(digests) == 1
    us = lambda v: v / 1e3
    rp50, pp50 = us(statistics.median(rust)), us(statistics.median(py))
    rmean, pmean = us(statistics.fmean(rust)), us(statistics.fmean(py))
    print(f"{len(records)} records x {a.repeat} runs, hashing encoder, tokens={'on' if a.tokens else 'off'}")
    print(f"rust   admit: p50 {rp50:9.1f} us   mean {rmean:9.1f} us")
    print(f"python admit: p50 {pp50:9.1f} us   mean {pmean:9.1f} us")
    print(f"ratio python/rust: p50 {pp50 / rp50:.3f}   mean {pmean / rmean:.3f}   overhead p50 {pp50 - rp50:+.1f} us")


if __name__ == "__main__":
    main()
