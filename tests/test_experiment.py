"""`spade experiment` end to end with the embedded model: two arms (SPADE, the fixed pool), one iteration each, smaller
than tests/test_selfplay.py's real iteration, scored on reasoning-gym at two items per group; the report, its plots
and the matched budget."""
import json
import subprocess
import sys
from pathlib import Path

# the loop's own held-out curve and the model's hints are tested in tests/test_selfplay.py: here the suites score
SCALE = ['selfplay.iterations=1', 'selfplay.designs_per_iteration=1', 'designer.skills=[reasoning_game]',
         'designer.max_new_tokens=160', 'selfplay.heldout=[]', 'hints.source=inline',
         'selfplay.replay_envs=1', 'selfplay.plays=1', 'reward.seed_test=false',
         # the preset's learning settings back to the paper's: one play a seed has no group, the pool is the seed envs
         'trainer.agent_baseline=env', 'selfplay.train_envs=null', 'selfplay.seeds_per_env=2']


def test_spade_experiment_runs_both_arms_scores_their_snapshots_and_writes_the_report(tmp_path):
    out = tmp_path/'xp'
    cmd = [str(Path(sys.executable).parent/'spade'), 'experiment', '--preset', 'tiny-cpu', '--arms', 'spade,fixed-pool',
           '--suites', 'rg', '--limit', '2', '--max-new-tokens', '32', '--out', str(out),
           *[x for s in SCALE for x in ('--set', s)]]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = (out/'report.md').read_text()
    print(report)
    for arm in ('base model', 'spade', 'fixed-pool'):
        assert f'| rg | all | {arm} | {0 if arm == "base model" else 1} | 8 |' in report, arm  # 4 groups x 2 items
    assert 'cover the evaluation items only' in report
    assert all((out/'plots'/n).is_file() for n in ('curves-rg.png', 'diversity.png'))
    evals = sorted(p.relative_to(out/'evals').as_posix() for p in (out/'evals').rglob('*.json'))
    assert evals == ['base.json', 'fixed-pool-seed0/iteration-0000.json', 'spade-seed0/iteration-0000.json']
    rows = {a: json.loads((out/'runs'/f'{a}-seed0'/'metrics.jsonl').read_text().splitlines()[0]) for a in ('spade', 'fixed-pool')}
    # matched: 2 environments an iteration (1 design + 1 replay), two seeds each, one play
    assert rows['fixed-pool']['agent_episodes'] == 2 * 2 and 0 < rows['spade']['agent_episodes'] <= 2 * 2
    assert rows['fixed-pool']['designs'] is None and rows['spade']['designs'] == 1
    # a second call finds it all done: no run starts, nothing is scored again
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and 'starting' not in again.stdout and 'scoring' not in again.stdout, again.stdout[-2000:]
