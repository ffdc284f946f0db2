"""`spade launch --dry-run` for every preset and for the SLURM example: the commands, and the GPUs each gets.

The launcher's process handling (servers waited for, everything stopped on exit and on Ctrl-C) is tested in
nbs/18a_launch.ipynb with stand-in processes; tests/test_vllm.py launches real vLLM servers and training ranks.
"""
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from spade_nb.cli import main
from spade_nb.selfplay import list_presets, load_config

ROOT = Path(__file__).resolve().parents[1]


def _commands(out: str) -> list[list[str]]:
    lines = out.split('commands:\n', 1)[1].split('\n\n', 1)[0].splitlines()
    return [shlex.split(line) for line in lines if line.startswith('  ')]


def _gpus(argv: list[str]) -> list[int]:
    env = dict(a.split('=', 1) for a in argv if re.match(r'^[A-Z_]+=', a))
    return [int(g) for g in env['CUDA_VISIBLE_DEVICES'].split(',')] if 'CUDA_VISIBLE_DEVICES' in env else []


@pytest.mark.parametrize('preset', list_presets())
def test_a_dry_run_of_every_preset(preset, capsys, tmp_path):
    assert main(['launch', '--preset', preset, '--dry-run', '--run-dir', str(tmp_path/'run')]) == 0
    out = capsys.readouterr().out
    cfg, cmds = load_config(preset), _commands(out)
    L = cfg.launch
    servers, (trainer,) = cmds[:-1], cmds[-1:]
    assert len(servers) == (L.data_parallel if L.generation_gpus else 0)
    for s in servers:
        assert ('serve' in s or 'vllm.entrypoints.openai.api_server' in s) and '--enable-lora' in s
        k = s.index('--lora-target-modules')  # LoRA slots on the modules the trainer trains, not on every module vLLM supports
        assert s[k + 1:k + 1 + len(cfg.trainer.target_modules)] == cfg.trainer.target_modules
        assert len(_gpus(s)) == L.tensor_parallel
    assert any(a.endswith('accelerate') for a in trainer) and trainer[trainer.index('--num_processes') + 1] == str(L.training_gpus)
    assert trainer[trainer.index('--run-dir') + 1] == str(tmp_path/'run') and '--preset' in trainer
    every = [g for c in cmds for g in _gpus(c)]
    assert sorted(every) == list(range(L.gpus)), every  # each GPU once, none left out
    if servers:  # the ranks are told where the servers are and where adapters go
        urls = [f'http://127.0.0.1:{s[s.index("--port") + 1]}' for s in servers]
        assert f'llm.servers=[{",".join(urls)}]' in trainer and f'llm.engine.adapter_dir={tmp_path / "run" / "adapters"}' in trainer


def test_too_few_gpus_and_a_taken_run_directory_are_refused(capsys, tmp_path):
    assert main(['launch', '--preset', 'full-30b', '--gpus', '4', '--dry-run']) == 2
    assert '--gpus is 4' in capsys.readouterr().err
    (tmp_path/'config.yaml').write_text('name: x\n')
    assert main(['launch', '--preset', 'tiny-cpu', '--run-dir', str(tmp_path), '--dry-run']) == 2
    assert 'already holds a run' in capsys.readouterr().err


def test_the_slurm_example_dry_runs(tmp_path):
    script = ROOT/'examples'/'slurm'/'full-30b-two-nodes.sbatch'
    env = {**os.environ, 'SPADE_DRY_RUN': '1', 'SLURM_JOB_NODELIST': 'gpu-a gpu-b', 'RUN_DIR': str(tmp_path/'run')}
    r = subprocess.run(['bash', str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    parts = r.stdout.split('spade launch: ')[1:]  # the two nodes' launchers run at once: either may print first
    (serve,), (train,) = [p for p in parts if 'server-0' in p], [p for p in parts if 'server-0' not in p]
    servers = _commands('x: ' + serve)
    assert len(servers) == 4 and [_gpus(s) for s in servers] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert all(s[s.index('--host') + 1] == '0.0.0.0' for s in servers)  # node 2 reaches them
    (trainer,) = _commands('x: ' + train)
    assert _gpus(trainer) == list(range(8)) and trainer[trainer.index('--num_processes') + 1] == '8'
    assert 'llm.servers=[http://gpu-a:8000,http://gpu-a:8001,http://gpu-a:8002,http://gpu-a:8003]' in trainer
    resumed = subprocess.run(['bash', str(script)], capture_output=True, text=True, env={**env, 'RESUME': '1'}, timeout=300)
    assert resumed.returncode != 0 and 'not a spade_nb run directory' in resumed.stderr  # nothing to resume yet: said, not started


def test_an_inherited_gpu_list_is_mapped_and_the_shipped_accelerate_config_is_passed(capsys, tmp_path, monkeypatch):
    # a SLURM or Kubernetes job given GPUs 4-7 (without renumbering) sees them as 0-3: servers and ranks stay on them
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '4,5,6,7')
    assert main(['launch', '--preset', 'multi-gpu-8b', '--gpus', '4', '--dry-run', '--run-dir', str(tmp_path/'r')]) == 0
    cmds = _commands(capsys.readouterr().out)
    assert sorted(g for c in cmds for g in _gpus(c)) == [4, 5, 6, 7]
    trainer = cmds[-1]
    config = Path(trainer[trainer.index('--config_file') + 1])
    assert config.name == 'one-node.yaml' and config.is_file()  # a user's default accelerate config cannot win
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '4,5')  # fewer than the run asks for: said before anything starts
    assert main(['launch', '--preset', 'multi-gpu-8b', '--gpus', '4', '--dry-run', '--run-dir', str(tmp_path/'r')]) == 2
    assert 'CUDA_VISIBLE_DEVICES=4,5 makes 2 visible' in capsys.readouterr().err
    monkeypatch.delenv('CUDA_VISIBLE_DEVICES')
    assert main(['launch', '--preset', 'tiny-cpu', '--dry-run', '--run-dir', str(tmp_path/'c')]) == 0
    trainer = _commands(capsys.readouterr().out)[-1]
    assert Path(trainer[trainer.index('--config_file') + 1]).name == 'one-process.yaml'
