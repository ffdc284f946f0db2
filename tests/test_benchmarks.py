"""Every benchmark script runs end to end at small sizes and prints its figures beside their goals, so that a
benchmark that stopped running is caught here and not when someone needs its figures (`benchmarks/memory.py`
failed on the replays column for several sessions before this test). The figures at these sizes mean nothing;
measure at the default sizes. `gpu_check.py` has its own test (`tests/test_gpu_check.py`)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMALL = {
    'memory': ['--sizes', '200', '500', '--reps', '10'],
    'regret': ['--reps', '20'],
    'rollout': ['--turns', '1', '--new-tokens', '4'],
    'trainer': ['--seqs', '2', '--len', '32', '--reps', '1'],
    'generation': ['--reps', '1', '--batch', '2', '--new-tokens', '4', '--no-vllm'],
    'sandbox': ['--steps', '50', '--admissions', '1'],
    'selfplay': ['--set', 'selfplay.designs_per_iteration=1', '--set', 'designer.max_new_tokens=16', '--set', 'selfplay.replay_envs=1',
                 '--set', 'rollout.max_turns=1', '--set', 'rollout.max_new_tokens=8', '--set', 'hints.max_new_tokens=8',
                 '--set', 'selfplay.heldout=[CaesarEnv]', '--set', 'selfplay.eval_seeds=1', '--set', 'selfplay.seeds_per_env=2',
                 '--profile', 'prof.out'],
    'threads': ['--threads', '1', '--loads', '0', '--batch', '1', '--new-tokens', '4'],
    'designer_probe': ['--designs', '2', '--batch', '2', '--max-new-tokens', '16', '--seeds', '1', '--plays', '1', '--max-turns', '2', '--turn-tokens', '8'],
}


def test_every_benchmark_has_a_small_run():
    assert {p.stem for p in (ROOT/'benchmarks').glob('*.py')} - {'gpu_check'} == set(SMALL)


@pytest.mark.parametrize('name', list(SMALL))
def test_a_benchmark_runs_at_small_sizes(name, tmp_path):
    p = subprocess.run([sys.executable, str(ROOT/'benchmarks'/f'{name}.py'), *SMALL[name]],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    verdicts = re.findall(r'\b(NOT met|met)\b', p.stdout)
    assert verdicts, f'{name}: no figure printed beside its goal:\n{p.stdout[-2000:]}'
    print(p.stdout[-1500:])
