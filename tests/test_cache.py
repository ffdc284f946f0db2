"The model cache is built once even when several processes ask for it at the same moment."
import multiprocessing as mp
import time
from pathlib import Path

from spade_nb.embedded import build_once


def _slow_build(tmp: Path):
    counter = tmp.parent/'builds.log'
    with open(counter, 'a') as f: f.write('x')
    time.sleep(0.5)
    (tmp/'weights.bin').write_bytes(b'w' * 1000)


def _ask(target):
    p = build_once(Path(target), _slow_build)
    return (p/'weights.bin').stat().st_size


def test_concurrent_processes_build_once(tmp_path):
    target = tmp_path/'model'
    with mp.get_context('spawn').Pool(4) as pool:
        sizes = pool.map(_ask, [str(target)] * 4)
    assert sizes == [1000] * 4
    assert (tmp_path/'builds.log').read_text() == 'x'  # exactly one build
    assert sorted(p.name for p in tmp_path.iterdir()) == ['builds.log', 'model', 'model.lock']


def test_killed_build_leaves_nothing_half_done(tmp_path):
    target = tmp_path/'model'
    ctx = mp.get_context('spawn')
    p = ctx.Process(target=_ask, args=(str(target),))
    p.start()
    while not (tmp_path/'builds.log').exists(): time.sleep(0.02)  # the build has started
    p.kill(); p.join()
    assert not target.exists()  # a reader never sees a half-built folder
    assert _ask(str(target)) == 1000  # the next build cleans up and completes
    assert not list(tmp_path.glob('.model.tmp-*'))
