"The memory file under stress: corruption, concurrent readers, a process killed while writing."
import multiprocessing as mp
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spade_nb.memory import EnvMemory, EnvRecord, MemoryFileError


def _record(i: int, iteration: int = 0) -> EnvRecord:
    "A structurally unique environment for each i (the bits of i pick methods of different shapes)."
    body = '\n'.join(f'    def m{b}(self, a):\n        return {"-" * (b + 1)}a' for b in range(20) if i >> b & 1)
    code = f'class E{i}(TextEnv):\n    max_turns = 3\n' + body + '\n    def step(self, a):\n        return a\n'
    return EnvRecord(code, f'E{i}', 'TextEnv', 'reasoning_game', behavioural_fp=f'fp{i}', iteration=iteration)


def test_corrupted_file_is_reported_and_left_untouched(tmp_path):
    p = tmp_path/'memory.sqlite'
    with EnvMemory(p) as m:
        for i in range(5): m.add(_record(i))
    data = bytearray(p.read_bytes())
    data[100:4000] = os.urandom(3900)  # smash the header and the first pages
    p.write_bytes(bytes(data))
    with pytest.raises(MemoryFileError, match='memory.sqlite'):
        EnvMemory(p)
    assert p.read_bytes() == bytes(data)


def test_a_foreign_sqlite_file_is_refused(tmp_path):
    p = tmp_path/'other.sqlite'
    sqlite3.connect(p).execute('CREATE TABLE t (x)').connection.commit()
    with pytest.raises(MemoryFileError, match='not a spade_nb environment memory'):
        EnvMemory(p)


def _reader(path, q):
    m = EnvMemory(path)
    seen = []
    for _ in range(40):
        seen.append(len(m.records()))
        time.sleep(0.01)
    q.put(seen)


def test_concurrent_readers_see_committed_prefixes(tmp_path):
    p = tmp_path/'memory.sqlite'
    EnvMemory(p).close()
    q = mp.get_context('spawn').Queue()
    readers = [mp.get_context('spawn').Process(target=_reader, args=(str(p), q)) for _ in range(2)]
    for r in readers: r.start()
    with EnvMemory(p) as m:
        for i in range(60): m.add(_record(i)); time.sleep(0.005)
    for r in readers: r.join(timeout=60)
    for _ in readers:
        seen = q.get(timeout=10)
        assert seen == sorted(seen) and all(0 <= n <= 60 for n in seen)  # never a torn or shrinking view


WRITER = '''
import sys
sys.path.insert(0, {tests!r})
from test_memory import _record
from spade_nb.memory import EnvMemory
m = EnvMemory({path!r})
i = 0
while True:
    m.add(_record(i)); m.update_scores(i + 1, iteration=0, plays=4, regret=0.1, win_rate_nohint=0.5)
    i += 1
    print(i, flush=True)
'''


def test_kill_during_writes_loses_nothing_committed(tmp_path):
    p = tmp_path/'memory.sqlite'
    proc = subprocess.Popen([sys.executable, '-c', WRITER.format(tests=str(Path(__file__).parent), path=str(p))],
                            stdout=subprocess.PIPE, text=True)
    done = 0
    while done < 40: done = int(proc.stdout.readline())
    proc.send_signal(signal.SIGKILL); proc.wait()
    assert sqlite3.connect(p).execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
    with EnvMemory(p) as m:
        n = len(m)
        assert n >= done  # every add reported before the kill was committed
        ids = [r.id for r in m.records()]
        assert ids == list(range(1, n + 1))
        assert all(m.get(i).plays in (0, 4) for i in ids)  # scores are whole or absent, never half-written
        m.add(_record(10_000))  # and the file is writable again
