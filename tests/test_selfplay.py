"""The main job: a run killed with SIGKILL resumes and ends equal to an uninterrupted one; one real iteration."""
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from spade_nb.memory import EnvMemory
from spade_nb.selfplay import Run, SelfPlay, load_config

SCRIPT = '''
import sys
from spade_nb.selfplay import SelfPlay, load_config
from spade_nb.testing import FAST_RUN, known_good_design, scripted_policy, stateless_script
cfg = load_config('tiny-cpu', overrides=FAST_RUN)
mode, run_dir = sys.argv[1], sys.argv[2]
pol = scripted_policy(stateless_script(known_good_design('GridWalkEnv')))
sp = SelfPlay.start(cfg, run_dir, policy=pol) if mode == 'start' else SelfPlay.resume(run_dir, policy=pol)
sp.run()
'''


def _launch(tmp, mode, run_dir):
    script = tmp/'run.py'
    script.write_text(SCRIPT)
    return subprocess.Popen([sys.executable, str(script), mode, str(run_dir)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _state(run_dir):
    rows = [{k: v for k, v in r.items() if 'seconds' not in k} for r in Run.read_metrics(run_dir)]  # timings aside
    with EnvMemory(Path(run_dir)/'memory.sqlite') as m:
        records = [asdict(r) for r in m.records(include_evicted=True)]
        rejected = [(r['sha256'], r['reason'], r['iteration']) for r in m.rejected()]
        history = [m.history(r['id']) for r in records]
    return rows, records, rejected, history


def test_killed_run_resumes_to_the_same_end(tmp_path):
    ref = _launch(tmp_path, 'start', tmp_path/'straight')
    out, _ = ref.communicate(timeout=900)
    assert ref.returncode == 0, out[-3000:]
    p = _launch(tmp_path, 'start', tmp_path/'killed')
    metrics = tmp_path/'killed'/'metrics.jsonl'
    deadline = time.monotonic() + 600
    while (not metrics.exists() or len(metrics.read_text().splitlines()) < 1) and time.monotonic() < deadline: time.sleep(0.2)
    time.sleep(2.0)  # into the second iteration
    p.send_signal(signal.SIGKILL); p.wait()
    done_before = len(Run.read_metrics(tmp_path/'killed'))
    assert done_before < 3, 'the run finished before it could be killed'
    r = _launch(tmp_path, 'resume', tmp_path/'killed')
    out, _ = r.communicate(timeout=900)
    assert r.returncode == 0, out[-3000:]
    assert 'resuming' in out
    a, b = _state(tmp_path/'straight'), _state(tmp_path/'killed')
    assert [row['iteration'] for row in b[0]] == [0, 1, 2]
    assert a[0] == b[0]  # metric rows (timings aside)
    assert a[1] == b[1] and a[2] == b[2] and a[3] == b[3]  # memory contents, rejected designs, score histories
    assert any(r['admitted'] for r in a[0]) and any(r['adv_abs_agent'] for r in a[0]) and a[0][-1]['adapter_version'] >= 1  # really trained
    assert any(r['window_envs'] for r in a[0]) and any(r['designer_rewards'] for r in a[0])  # a design played over its window, rewarded from it


def test_one_real_iteration_with_the_embedded_model(tmp_path):
    "The designer writes for itself; everything real. The preset, one iteration, a little smaller."
    cfg = load_config('tiny-cpu', overrides=['selfplay.iterations=1', 'selfplay.designs_per_iteration=2', 'designer.skills=[reasoning_game]',
                                             'designer.max_new_tokens=160', 'selfplay.eval_seeds=2',
                                             'selfplay.replay_envs=2', 'selfplay.plays=1', 'reward.seed_test=false',  # one play a seed: no seed test
                                             'trainer.agent_baseline=env', 'selfplay.train_envs=null', 'selfplay.seeds_per_env=2'])  # nor a seed's group
    sp = SelfPlay.start(cfg, tmp_path/'run')
    (row,) = sp.run()
    run = Run.load(tmp_path/'run')
    assert row['designs'] == 2
    # the counts agree with the designs transcript and with the memory, design by design
    from collections import Counter
    rows = run.transcripts(0, 'designs')
    assert Counter(r['reason'] for r in rows if r['reason'] not in ('ok', 'duplicate')) == Counter(row['rejected_by_reason'])
    assert sum(r['reason'] == 'ok' for r in rows) == row['admitted'] and sum(r['reason'] == 'duplicate' for r in rows) == row['duplicates']
    assert all(run.memory.get(r['env_id']).code == r['code'] for r in rows if r['reason'] == 'ok')
    assert Counter(r['reason'] for r in run.memory.rejected() if r['iteration'] == 0) == \
        Counter(r['reason'] for r in rows if r['reason'] not in ('ok', 'duplicate', 'heldout_duplicate', 'parse'))
    assert np.isfinite(row['loss_agent']) and np.isfinite(row['loss_designer'])
    assert row['win_rate_heldout'] is not None and len(run.memory) >= 6  # 8 seed environments, 2 held out, and any admitted design
    # a 135M model often gives every group equal rewards (nothing parses): then there is no update, and the row says so
    assert row['adapter_version'] == (1 if row['zero_variance_share'] < 1 else None)
    assert len(run.transcripts(0, 'designs')) == 2 and len(run.transcripts(0, 'episodes')) > 0
    assert all((tmp_path/'run'/'plots'/f'{n}.png').is_file() for n in ('regret', 'win_rates', 'validity', 'heldout', 'loss', 'time'))
    print({k: row[k] for k in ('admitted', 'rejected_by_reason', 'agent_samples', 'designer_samples', 'loss_agent', 'loss_designer',
                              'win_rate_heldout', 'seconds')})
