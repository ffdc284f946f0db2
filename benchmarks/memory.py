"""Environment memory costs as it grows: `add` (with deduplication) and `sample_replay` at 1 K, 10 K and 100 K records.

The memory is bulk-loaded to each size (records with distinct fingerprints, code and behaviour MinHash values,
inserted in one transaction), then `add` is timed on new, structurally distinct environments with what they showed
in admission (each its own transaction: dedup, the near-duplicate and the exact novelty comparison with every live
environment, code and behaviour, included) and `sample_replay` on batches of 8. Goal: both under 10 ms p50 at 100 K.
Finishes in about two minutes.   python benchmarks/memory.py [--sizes 1000 10000 100000] [--reps 200]
"""
import argparse
import hashlib
import tempfile
import time
from pathlib import Path

import numpy as np

from spade_nb.memory import _COLS, EnvMemory, EnvRecord, _bands, _row_values, behaviour_minhash, minhash


def code_for(i: int) -> str:
    body = '\n'.join(f'    def m{b}(self, a):\n        return {"-" * (b + 1)}a' for b in range(24) if i >> b & 1)
    return f'class E{i}(TextEnv):\n    max_turns = 5\n{body}\n    def step(self, a):\n        return a\n'


def behaviour_for(i: int) -> str:
    "What environment `i` showed in admission: a few lines of observations and rewards, as `behaviour_text` writes them."
    return '\n'.join(f'seed {s}: the board shows {i % 97} and {i * s % 89}; try {s}. reward {s % 2}' for s in range(27))


def bulk_load(mem: EnvMemory, start: int, stop: int, rng):
    "Insert records start..stop-1 directly (fingerprints, LSH bands, MinHash values and scores included), in one transaction."
    template, btemplate = minhash(code_for(1)), behaviour_minhash(behaviour_for(1))
    rows, lsh, meta = [], [], []
    for i in range(start, stop):
        code = code_for(i)
        rec = EnvRecord(code, f'E{i}', 'TextEnv', 'reasoning_game', structural_fp=hashlib.sha256(f's{i}'.encode()).hexdigest(),
                        behavioural_fp=f'b{i}', iteration=int(rng.integers(0, 50)), regret=float(rng.random()),
                        regret_lo=float(rng.random()) - 0.1, win_rate_nohint=float(rng.random()), last_played=int(rng.integers(0, 50)))
        rows.append(_row_values(rec))  # as EnvMemory.add stores them
        mh = template.copy(); mh[: 1 + i % 60] = rng.integers(0, 2**61, 1 + i % 60, dtype=np.uint64)  # related but distinct
        bmh = btemplate.copy(); bmh[: 1 + i % 50] = rng.integers(0, 2**61, 1 + i % 50, dtype=np.uint64)
        lsh += [(b, h, i + 1) for b, h in enumerate(_bands(mh))]
        meta += [(f'minhash:{i + 1}', mh.tobytes().hex()), (f'bminhash:{i + 1}', bmh.tobytes().hex())]
    with mem._tx():
        mem.db.executemany(f'INSERT INTO envs ({", ".join(_COLS)}) VALUES ({", ".join("?" * len(_COLS))})', rows)
        mem.db.executemany('INSERT INTO lsh VALUES (?, ?, ?)', lsh)
        mem.db.executemany('INSERT OR REPLACE INTO meta VALUES (?, ?)', meta)
    mem._recount()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--sizes', type=int, nargs='+', default=[1000, 10000, 100000])
    ap.add_argument('--reps', type=int, default=200)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as d:
        mem = EnvMemory(Path(d)/'memory.sqlite', capacity=10**7)
        n, fresh = 0, 1 << 22
        print(f'{"records":>8} | {"add p50":>9} {"add p99":>9} | {"sample p50":>10} {"sample p99":>10} | goal: p50 < 10 ms')
        for size in a.sizes:
            t = time.perf_counter(); bulk_load(mem, n, size, rng); n = size; load = time.perf_counter() - t
            adds = []
            t = time.perf_counter()  # the first add after a bulk load reads the similarity index from the file, once
            mem.add(EnvRecord(code_for(fresh), f'E{fresh}', 'TextEnv', 'reasoning_game', behavioural_fp=f'new{fresh}'),
                    behaviour=behaviour_for(fresh))
            first, fresh = time.perf_counter() - t, fresh + 1
            for _ in range(a.reps):
                rec = EnvRecord(code_for(fresh), f'E{fresh}', 'TextEnv', 'reasoning_game', behavioural_fp=f'new{fresh}', iteration=50)
                fresh += 1
                t = time.perf_counter(); _, new = mem.add(rec, behaviour=behaviour_for(fresh)); adds.append(time.perf_counter() - t)
                assert new
            mem.sample_replay(8, rng, iteration=51)  # the first call after writes builds the arrays
            samples = []
            for _ in range(a.reps):
                t = time.perf_counter(); mem.sample_replay(8, rng, iteration=51); samples.append(time.perf_counter() - t)
            ap50, ap99, sp50, sp99 = (1000 * np.percentile(x, q) for x in (adds, samples) for q in (50, 99))
            ok = 'met' if ap50 < 10 and sp50 < 10 else 'NOT met'
            print(f'{len(mem):>8} | {ap50:>6.2f} ms {ap99:>6.2f} ms | {sp50:>7.2f} ms {sp99:>7.2f} ms | {ok}  (bulk load {load:.1f} s, first add {first:.2f} s)')
        mem.close()


if __name__ == '__main__':
    main()
