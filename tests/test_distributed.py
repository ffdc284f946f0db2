"""The loop on two processes under `accelerate launch`: rank 0 runs it, both train, and the run is one process's.

Two CPU processes (gloo) run the scripted loop of `tests/test_selfplay.py` for an iteration: rank 0 designs, admits,
plays and writes the run directory, rank 1 trains on its shard of the update (with the TIS cap rank 0's engine would set: the followers' own is off). A
single process then resumes the
two-process run's checkpoint for the second iteration, and the metric rows equal an uninterrupted single-process run's
(float columns to float rounding: the two processes sum the same gradient in another order).
"""
import math
import subprocess
import sys
from pathlib import Path

from spade_nb.selfplay import Run

from test_trainer_ddp import launch_two

SCRIPT = '''
import sys
from spade_nb.distributed import RankZeroTrainer, follow, init_distributed, world
from spade_nb.selfplay import SelfPlay, load_config
from spade_nb.testing import FAST_RUN, known_good_design, scripted_policy, stateless_script
from spade_nb.trainer import Trainer
mode, run_dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfg = load_config('tiny-cpu', overrides=FAST_RUN)
init_distributed()
pol = scripted_policy(stateless_script(known_good_design('GridWalkEnv')))
if world()[0] != 0:
    tr = Trainer(pol, cfg.trainer)
    print(f'rank {world()[0]} trained', follow(tr), 'updates with TIS cap', tr.tis_cap, flush=True)
else:
    sp = SelfPlay.start(cfg, run_dir, policy=pol) if mode == 'start' else SelfPlay.resume(run_dir, policy=pol)
    assert isinstance(sp.trainer, RankZeroTrainer) == (world()[1] > 1), (sp.trainer, world())
    getattr(sp.trainer, 'trainer', sp.trainer).tis_cap = 2.0  # as when an engine samples on rank 0 (followers: 'auto' is off)
    sp.run(iterations=n)
    if isinstance(sp.trainer, RankZeroTrainer): sp.trainer.stop()
'''


def _alone(script, *args):
    r = subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r.stdout


def _close(a, b, path=''):
    "Equal rows, floats to 1e-4 relative (or 1e-6 absolute): the differences, as paths."
    if isinstance(a, float) and isinstance(b, (int, float)):
        return [] if math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6) or (a != a and b != b) else [f'{path}: {a} != {b}']
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys(): return [f'{path}: keys {sorted(set(a) ^ set(b))}']
        return [d for k in a for d in _close(a[k], b[k], f'{path}.{k}')]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _close(x, y, f'{path}[{i}]')]
    return [] if a == b else [f'{path}: {a!r} != {b!r}']


def test_two_processes_run_the_loop_as_one_and_resume_on_one(tmp_path):
    script = tmp_path/'loop.py'
    script.write_text(SCRIPT)
    _alone(script, 'start', tmp_path/'one', 2)
    out = launch_two(script, 'start', tmp_path/'two', 1)
    assert 'rank 1 trained 1 updates with TIS cap 2.0' in out, out[-2000:]  # rank 0's, not its own
    assert len(Run.read_metrics(tmp_path/'two')) == 1
    out = _alone(script, 'resume', tmp_path/'two', 1)  # a checkpoint of two processes, resumed on one
    assert 'resuming' in out
    rows = {k: [{c: v for c, v in r.items() if 'seconds' not in c} for r in Run.read_metrics(tmp_path/k)]
            for k in ('one', 'two')}
    assert [r['iteration'] for r in rows['two']] == [0, 1]
    assert [r['adapter_version'] for r in rows['two']] == [1, 2]  # trained on two processes, then on one
    assert rows['two'][-1]['agent_samples'] > 0 and any(r['loss_agent'] for r in rows['two'])
    assert _close(rows['one'], rows['two']) == []


def test_a_resumed_run_may_change_where_it_generates_and_nothing_it_learns_from(tmp_path):
    import pytest
    from spade_nb.core import ConfigError
    from spade_nb.selfplay import RunDir, load_config, resumed_config
    rd = RunDir.new(tmp_path/'run')
    rd.write_start(load_config('tiny-cpu'))
    cfg = resumed_config(rd, ['llm.servers=[http://10.0.0.7:8000]', 'launch.training_gpus=2'])
    assert (cfg.llm.servers, cfg.launch.training_gpus) == (['http://10.0.0.7:8000'], 2)
    assert rd.config().llm.servers == ['http://10.0.0.7:8000']  # written back: the next resume starts from it
    for key in ('trainer.lr=1e-3', 'selfplay.iterations=99', 'llm.model=Qwen/Qwen3-8B'):
        with pytest.raises(ConfigError, match=key.split('=')[0]): resumed_config(rd, [key])
    assert rd.config().trainer.lr == load_config('tiny-cpu').trainer.lr
