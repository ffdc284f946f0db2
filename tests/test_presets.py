"""The presets: each resolves; the single-gpu one runs through the same loop, scaled down, with only model and sizes changed."""
import json
import math
from pathlib import Path

import pytest

from spade_nb.cli import main
from spade_nb.selfplay import Run, list_presets, load_config


def test_every_preset_resolves():
    assert {'tiny-cpu', 'single-gpu'} <= set(list_presets())
    tiny, gpu = load_config('tiny-cpu'), load_config('single-gpu')
    assert tiny.llm.model == 'embedded' and tiny.selfplay.iterations == 2
    assert gpu.llm.model == 'Qwen/Qwen3-4B-Instruct-2507' and gpu.llm.dtype == 'bfloat16'
    assert gpu.llm.backend == 'vllm' and tiny.llm.backend == 'hf' and gpu.trainer.lora_r <= gpu.llm.engine.max_lora_rank
    rg = [h for h in gpu.selfplay.heldout if h.startswith('rg:')]
    assert len(rg) * min(gpu.selfplay.eval_seeds, gpu.selfplay.heldout_instances) >= 300  # hundreds of held-out questions
    assert any(h.startswith('rg:') for h in tiny.selfplay.heldout)
    coder = load_config('coder-cpu')  # the hub id (an offline copy stands in where its parts are installed), on a CPU
    assert coder.llm.model == 'Qwen/Qwen2.5-Coder-1.5B-Instruct' and coder.llm.backend == 'hf' and coder.llm.dtype == 'bfloat16'
    assert coder.designer.unscored_exemplars and coder.designer.n_positive >= 1 and coder.designer.repair_turns >= 1


# Only what a 4B model on a GPU needs and a random 2-layer model on a CPU test cannot have: the model, and
# counts and lengths. This venv has no vLLM, so these runs take the preset's documented fallback, the HF
# backend (`HF`); tests/test_vllm.py runs the preset on its own backend, vLLM. Everything else (bf16, gradient checkpointing, repair turns, no shaping, no KL, the
# held-out set of 16 reasoning-gym datasets) is the preset's own.
SCALE_DOWN = ['selfplay.iterations=1', 'selfplay.designs_per_iteration=2', 'selfplay.replay_envs=2', 'selfplay.seeds_per_env=1',
              'selfplay.plays=1', 'reward.seed_test=false', 'selfplay.eval_seeds=1', 'selfplay.heldout_instances=4', 'selfplay.designer_delay=0',
              'designer.max_new_tokens=16', 'designer.document_tokens=64', 'hints.max_new_tokens=8', 'rollout.max_turns=2',
              'rollout.max_new_tokens=8', 'llm.max_context=4096', 'llm.batch_size=16', 'trainer.micro_batch_tokens=4096',
              'trainer.max_seq_len=4096']
HF = ['--set', 'llm.backend=hf', '--set', 'llm.device=cpu']  # bf16 on a CPU on purpose (bf16 on device auto asks for a GPU)


def _saved(pol, d):
    "A model folder, as a user's would be: weights, tokenizer and chat template."
    pol.model.save_pretrained(d)
    pol.tokenizer.save_pretrained(d)
    return d


@pytest.fixture(scope='module')
def tiny_model_dir(tmp_path_factory):
    from spade_nb.llm import tiny_policy
    return _saved(tiny_policy(max_context=4096), tmp_path_factory.mktemp('tiny-model'))


@pytest.mark.parametrize('quantization', ['none', 'nf4'])  # LoRA as the preset says, and QLoRA as its comment offers
def test_single_gpu_preset_runs_scaled_down(tmp_path, tiny_model_dir, capsys, quantization):
    run_dir = tmp_path/'run'
    argv = ['selfplay', '--preset', 'single-gpu', '--run-dir', str(run_dir), '--set', f'llm.model={tiny_model_dir}',
            '--set', f'llm.quantization={quantization}', *HF]
    for s in SCALE_DOWN: argv += ['--set', s]
    assert main(argv) == 0, capsys.readouterr().err
    said = [l.split(': ', 1)[1].split()[0] for l in capsys.readouterr().out.splitlines() if l.startswith('iteration 0, ')]
    assert said == ['design', 'admit', 'hints', 'play', 'eval', 'train', 'eval', 'checkpoint'], said  # a line a stage, not on a terminal
    run = Run.load(run_dir)
    cfg = run.config
    assert cfg.name == 'single-gpu' and cfg.llm.dtype == 'bfloat16' and cfg.trainer.gradient_checkpointing and cfg.designer.repair_turns == 1
    (row,) = run.metrics
    assert row['designs'] == 2 and math.isfinite(row['loss_agent']) and row['agent_samples'] > 0 and cfg.llm.quantization == quantization
    assert row['win_rate_heldout'] is not None and row['heldout_episodes'] == 2 + 16  # 2 seed envs and 16 datasets, one episode each
    assert len(row['win_rate_heldout_by_env']) == 18
    assert (run_dir/'plots'/'heldout.png').is_file()
    prov = json.loads((run_dir/'provenance.json').read_text())
    assert prov['model'] == str(tiny_model_dir) and prov['model_sha256'] is None


@pytest.fixture(scope='module')
def tiny_qwen3_dir(tmp_path_factory):
    from spade_nb.llm import tiny_qwen3_policy
    return _saved(tiny_qwen3_policy(max_context=4096), tmp_path_factory.mktemp('tiny-qwen3'))


def test_single_gpu_preset_runs_scaled_down_on_a_random_qwen3(tmp_path, tiny_qwen3_dir, capsys):
    "The preset's own model family: Qwen3's tokenizer and hybrid thinking template, a random Qwen3 of the real architecture (scaled down)."
    run_dir = tmp_path/'run'
    argv = ['selfplay', '--preset', 'single-gpu', '--run-dir', str(run_dir), '--set', f'llm.model={tiny_qwen3_dir}', *HF]
    for s in SCALE_DOWN: argv += ['--set', s]
    assert main(argv) == 0, capsys.readouterr().err
    run = Run.load(run_dir)
    (row,) = run.metrics
    assert row['designs'] == 2 and math.isfinite(row['loss_agent']) and row['agent_samples'] > 0
    assert row['heldout_episodes'] == 2 + 16
    eps = run.transcripts(0, 'episodes')
    assert eps and any(r.get('turns', 0) == 2 for r in eps)  # multi-turn episodes on a template that rewrites earlier turns


def test_the_single_gpu_preset_without_vllm_names_the_fallback(tmp_path, tiny_model_dir, capsys, monkeypatch):
    "The preset generates with vLLM; where vLLM is missing the run stops before loading any weights, with one line naming the key, the install and the fallback."
    import spade_nb.engines as engines
    monkeypatch.setattr(engines, '_has', lambda m: m != 'vllm')  # as on a machine without vLLM, whatever this venv has
    import transformers
    monkeypatch.setattr(transformers.AutoModelForCausalLM, 'from_pretrained', lambda *a, **k: pytest.fail('weights loaded'))
    assert main(['selfplay', '--preset', 'single-gpu', '--run-dir', str(tmp_path/'run'), '--set', f'llm.model={tiny_model_dir}']) == 2
    err = capsys.readouterr().err
    assert 'llm.backend: vllm: vllm is not installed' in err and '--set llm.backend=hf' in err and len(err.strip().splitlines()) == 1, err


def test_coder_cpu_preset_runs_scaled_down_in_bf16(tmp_path, tiny_model_dir, capsys):
    "The laptop preset with only the model and the counts changed: bf16 weights on a CPU, fp32 LoRA, both roles trained."
    run_dir = tmp_path/'run'
    argv = ['selfplay', '--preset', 'coder-cpu', '--run-dir', str(run_dir), '--set', f'llm.model={tiny_model_dir}', '--set', 'selfplay.eval_interval=1']
    for s in SCALE_DOWN: argv += ['--set', s]
    assert main(argv) == 0, capsys.readouterr().err
    run = Run.load(run_dir)
    assert run.config.name == 'coder-cpu' and run.config.llm.dtype == 'bfloat16'
    (row,) = run.metrics
    assert row['designs'] == 2 and row['agent_samples'] > 0 and math.isfinite(row['loss_agent']) and math.isfinite(row['loss_designer'])
    assert row['heldout_episodes'] == 4  # CaesarEnv and three reasoning-gym datasets, one episode each
