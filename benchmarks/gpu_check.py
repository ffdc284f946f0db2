"""What only a GPU can tell about the single-gpu preset, measured with random-initialised models of the real shapes.

Nothing is downloaded: the models are built from config dimensions (Qwen3-4B-Instruct-2507; one layer of
Qwen3-30B-A3B), the tokenizer is the Qwen3 one that ships with spade_nb. Sections, each printed beside the
preset's figure it checks (a section whose dependency is missing says so and is skipped):

1. env         torch, CUDA device, bf16, and which optional packages are installed (vllm, bitsandbytes, flash-attn)
2. generation  HF backend tokens/s at the preset's batch (llm.batch_size), and what that means for an iteration
3. trainer     at the preset's micro-batch (micro_batch_tokens in rows of max_seq_len): training tokens/s, the step's peak
               GPU memory above resting beside `spade plan`'s figure for it (`step_memory`); LoRA and QLoRA nf4, checkpointing on and off (a
               variant whose modelled memory exceeds the free GPU memory runs at the largest half of the micro-batch that fits,
               and says so; --quick: QLoRA with checkpointing only)
4. moe         one Qwen3-30B-A3B layer: forward and backward tokens/s and peak memory (when memory allows)
5. selfplay    one iteration of the single-gpu preset, counts scaled down, on the real-shape random Qwen3 in bf16, on the
               preset's backend (vLLM) where vLLM is installed, else on its documented fallback (HF), saying which; with
               each stage's generation rate (tokens generated / stage seconds: vLLM's tokens/s where it runs)
6. seeded      what per-request seeds cost vLLM at the preset's shape (llm.batch_size prompts of 2,048 tokens x 64 new tokens on
               the real-shape Qwen3-4B): every request seeded, as the backend sends them, against none (goal: ratio <= 1.10);
               then, on the same engine, a trained adapter's log-probs on vLLM against the HF copy's, before and after one
               more sleep/wake cycle (an adapter that stops applying after wake fails the check);
               needs vLLM (the dry run: a tiny Qwen3 on vLLM's CPU build, as tests/test_vllm.py runs it)

About 8 minutes on one H200 (`--quick`: meant to be under 6 on one H100, not yet measured). `--dry-run` runs every section with tiny shapes on the CPU in under a minute
(CI does): it checks the script, not the figures.

    python benchmarks/gpu_check.py [--dry-run] [--quick] [--sections env,generation,trainer,moe,selfplay] [--json out.json]
"""
import argparse
import json
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from spade_nb.plan import hf_config_kwargs

# the real shapes, from the dimensions `spade plan` computes with (configs/models/dimensions.yaml)
QWEN3_4B = {**hf_config_kwargs('Qwen/Qwen3-4B-Instruct-2507'), 'rope_theta': 5e6}
QWEN3_30B_A3B_LAYER = {**hf_config_kwargs('Qwen/Qwen3-30B-A3B-Instruct-2507'), 'num_hidden_layers': 1}
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=4096, tie_word_embeddings=True)
TINY_VLLM = {**TINY, 'hidden_size': 128, 'head_dim': 32}  # vLLM's CPU attention kernels take head_dim >= 32
TINY_MOE = dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2, num_hidden_layers=1,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096)
# the scaled-down run: only counts and lengths change (as in tests/test_presets.py)
SCALE_DOWN = ['selfplay.iterations=1', 'selfplay.designs_per_iteration=2', 'selfplay.replay_envs=2', 'selfplay.seeds_per_env=1',
              'selfplay.plays=1', 'reward.seed_test=false', 'selfplay.eval_seeds=1', 'selfplay.heldout_instances=4', 'selfplay.designer_delay=0',
              'designer.max_new_tokens=64', 'designer.document_tokens=256', 'hints.max_new_tokens=16', 'rollout.max_turns=2',
              'rollout.max_new_tokens=32', 'llm.max_context=8192', 'trainer.micro_batch_tokens=8192', 'trainer.max_seq_len=8192']


class Check:
    "The figures of one run, printed as they come and kept for --json."
    def __init__(self, dry: bool, quick: bool = False):
        self.dry, self.quick, self.figures, self.status = dry, quick, {}, {}

    def say(self, section: str, text: str, **figures):
        print(f'[{section}] {text}', flush=True)
        self.figures.setdefault(section, {}).update(figures)


def device_and_dtype(dry: bool):
    import torch
    if dry or not torch.cuda.is_available(): return 'cpu', torch.float32
    return 'cuda', torch.bfloat16


def peak_gb(device: str) -> float | None:
    import torch
    return torch.cuda.max_memory_allocated() / 2**30 if device == 'cuda' else None


def peak_text(device: str) -> str:
    "The peak torch allocated, beside what it reserved (its cache) and what the whole device had in use (other processes and\n    the CUDA context included): the figure `spade plan` must cover is the last."
    import torch
    p = peak_gb(device)
    if p is None: return 'peak GPU memory n/a on the CPU'
    free, total = torch.cuda.mem_get_info()
    return (f'peak {p:.1f} GiB allocated, {torch.cuda.max_memory_reserved() / 2**30:.1f} GiB reserved, '
            f'{(total - free) / 2**30:.1f} GiB in use on the device now')


def reset_peak(device: str):
    import gc
    import torch
    gc.collect()
    if device == 'cuda': torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()


def qwen3_model(shape: dict, dtype, device: str, seed: int = 0):
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM
    from spade_nb.llm import qwen3_tokenizer_path
    tok = AutoTokenizer.from_pretrained(qwen3_tokenizer_path())
    cfg = Qwen3Config(vocab_size=len(tok), eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **shape)
    torch.manual_seed(seed)
    was = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # built in bf16 directly: an fp32 copy of 4B weights would take 16 GB first
    try:
        with torch.device(device): model = Qwen3ForCausalLM(cfg)
    finally: torch.set_default_dtype(was)
    return model, tok


def section_env(ck: Check, preset):
    import importlib.util
    import torch
    dev, dtype = device_and_dtype(ck.dry)
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'
    total = torch.cuda.get_device_properties(0).total_memory / 2**30 if torch.cuda.is_available() else None
    have = {m: importlib.util.find_spec(m) is not None for m in ('vllm', 'bitsandbytes', 'flash_attn', 'peft', 'transformers')}
    ck.say('env', f'torch {torch.__version__}, CUDA device: {name}' + (f' ({total:.0f} GiB)' if total else '') +
           f', bf16: {torch.cuda.is_available() and torch.cuda.is_bf16_supported()}, running on {dev} in {str(dtype)[6:]}',
           torch=torch.__version__, device=name, total_gib=total)
    ck.say('env', 'installed: ' + ', '.join(f'{m} {"yes" if v else "NO"}' for m, v in have.items()), **have)
    if not ck.dry and dev == 'cpu': ck.say('env', 'no CUDA device: the figures below are CPU figures (use --dry-run on a CPU)')


def section_generation(ck: Check, preset):
    from spade_nb.llm import HFPolicy, SamplingParams
    dev, dtype = device_and_dtype(ck.dry)
    model, tok = qwen3_model(TINY if ck.dry else QWEN3_4B, dtype, dev)
    batch = 4 if ck.dry else preset.llm.batch_size
    prompt_len, new = (32, 8) if ck.dry else (2048, 64 if ck.quick else 256)
    pol = HFPolicy(model, tok, max_context=prompt_len + new + 8, batch_size=batch, name='qwen3-random')
    import numpy as np
    rng = np.random.default_rng(0)
    prompts = [rng.integers(100, 100000, prompt_len).tolist() for _ in range(batch)]
    params = SamplingParams(temperature=1.0, max_new_tokens=new, seed=0)
    pol.generate(prompts[:1], params.replace(max_new_tokens=2))  # warm-up
    reset_peak(dev)
    t = time.perf_counter()
    outs = pol.generate(prompts, params)
    secs = time.perf_counter() - t
    toks = sum(len(c.token_ids) for (c,) in outs)
    rate = toks / secs
    ro, sp = preset.rollout, preset.selfplay
    episodes = sp.replay_envs * sp.seeds_per_env * sp.plays * 2  # both arms of every seed
    turn_tokens = episodes * ro.max_turns * ro.max_new_tokens
    ck.say('generation', f'HF backend, batch {batch}, prompts of {prompt_len} tokens, {new} new: {toks} tokens in {secs:.1f} s = '
           f'{rate:.0f} tokens/s, {peak_text(dev)}', tokens_per_s=rate, batch=batch, peak_gib=peak_gb(dev))
    ck.say('generation', f'preset: up to {episodes} episodes x {ro.max_turns} turns x {ro.max_new_tokens} tokens = {turn_tokens:,} agent tokens '
           f'an iteration (llm.batch_size {preset.llm.batch_size}); at this rate up to {turn_tokens / rate / 60:.0f} min of generation an '
           f'iteration, {preset.selfplay.iterations} iterations up to {turn_tokens / rate * preset.selfplay.iterations / 3600:.0f} h '
           f'(an upper bound: episodes end early; vLLM is the preset\'s faster path)', iteration_agent_tokens=turn_tokens)


def section_trainer(ck: Check, preset):
    import importlib.util
    import numpy as np
    import torch
    from spade_nb.core import Sample
    from spade_nb.llm import LLMConfig
    from spade_nb.policy import load_policy, release
    from transformers import AutoConfig
    from spade_nb.trainer import MemoryPeak, ModelDims, Trainer, step_memory
    dev, dtype = device_and_dtype(ck.dry)
    model, tok = qwen3_model(TINY if ck.dry else QWEN3_4B, dtype, 'cpu' if ck.dry else dev)
    work = Path(tempfile.mkdtemp(prefix='gpu-check-'))
    try:
        model.save_pretrained(work); tok.save_pretrained(work)
        del model
        # the preset's micro-batch: micro_batch_tokens padded tokens in rows of max_seq_len (dry: the same shape, scaled down)
        tokens, length = (256, 128) if ck.dry else (preset.trainer.micro_batch_tokens, preset.trainer.max_seq_len)
        rng = np.random.default_rng(0)

        def make(seqs, length):  # rows padded, as in a run
            prompt = length // 4
            return [Sample(rng.integers(100, 100000, length - 8 * i).tolist(), [0] * prompt + [1] * (length - 8 * i - prompt),
                           [0.0] * prompt + [-1.0] * (length - 8 * i - prompt), 'agent', float(i % 2), 'g') for i in range(seqs)]
        free = torch.cuda.mem_get_info()[0] if dev == 'cuda' else None
        preset_seqs, preset_length = max(1, tokens // length), length
        for quant in ('none', 'nf4'):
            if quant == 'nf4' and not importlib.util.find_spec('bitsandbytes'):
                ck.say('trainer', 'nf4: skipped (bitsandbytes is not installed)'); continue
            for gc in ((True,) if ck.quick and quant == 'nf4' else (True, False)):
                key = f'{"qlora_nf4" if quant == "nf4" else "lora"}_{"ckpt" if gc else "nockpt"}'
                seqs, length = preset_seqs, preset_length
                dims = ModelDims.of(AutoConfig.from_pretrained(work), dtype='float32' if ck.dry else 'bfloat16', quantization=quant)
                while True:  # the preset's micro-batch, else the largest half of it that the model says fits (rows kept >= 1,024)
                    cfg = preset.trainer.replace(gradient_checkpointing=gc, micro_batch_tokens=seqs * length, max_seq_len=length)
                    est = step_memory(dims, cfg)
                    if free is None or est['total'] <= 0.9 * free or length <= 1024: break
                    seqs, length = (seqs // 2, length) if seqs > 1 else (seqs, length // 2)
                if (seqs, length) != (preset_seqs, preset_length):
                    ck.say('trainer', f'{key}: the preset\'s {preset_seqs} x {preset_length} tokens is modelled above the free memory: '
                           f'measured at {seqs} x {length}')
                samples = make(seqs, length)
                if free is not None and est['total'] > 0.9 * free:
                    ck.say('trainer', f'{key}: skipped: modelled {est["total"] / 2**30:.1f} GiB (step peak {est["step_peak"] / 2**30:.1f}) '
                           f'> 90% of the {free / 2**30:.0f} GiB free', **{f'{key}_modelled_gib': est['total'] / 2**30})
                    continue
                reset_peak(dev)
                pol = load_policy(LLMConfig(model=str(work), quantization=quant, dtype='float32' if ck.dry else 'bfloat16', device=dev))
                tr = Trainer(pol, cfg)
                tr.train_step(samples)  # warm-up
                t = time.perf_counter()
                with MemoryPeak(dev) as m: tr.train_step(samples)
                secs = time.perf_counter() - t
                measured = f'step peak {m.peak / 2**30:.1f} GiB above {m.resting / 2**30:.1f} resting' if dev == 'cuda' else 'GPU memory n/a on the CPU'
                ck.say('trainer', f'{key}: {seqs} x {length} tokens a step in {secs:.2f} s = {seqs * length / secs:.0f} tokens/s, {measured} '
                       f'(planned by spade plan: {est["step_peak"] / 2**30:.1f} above {est["resting"] / 2**30:.1f}; {peak_text(dev)}; preset: micro_batch_tokens '
                       f'{preset.trainer.micro_batch_tokens}, max_seq_len {preset.trainer.max_seq_len}, checkpointing {preset.trainer.gradient_checkpointing})',
                       **{f'{key}_tokens_per_s': seqs * length / secs, f'{key}_peak_gib': peak_gb(dev),
                          f'{key}_step_peak_gib': m.peak / 2**30 if dev == 'cuda' else None, f'{key}_modelled_step_peak_gib': est['step_peak'] / 2**30})
                del tr
                release(pol)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def section_moe(ck: Check, preset):
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    dev, dtype = device_and_dtype(ck.dry)
    shape = TINY_MOE if ck.dry else QWEN3_30B_A3B_LAYER
    reset_peak(dev)
    torch.manual_seed(0)
    with torch.device(dev): model = Qwen3MoeForCausalLM(Qwen3MoeConfig(vocab_size=151936, **shape)).to(dtype)
    length = 64 if ck.dry else 4096
    ids = torch.randint(100, 100000, (1, length), device=dev)
    model(input_ids=ids).logits.float().mean().backward()  # warm-up
    model.zero_grad(set_to_none=True)
    t = time.perf_counter()
    model(input_ids=ids).logits.float().mean().backward()
    if dev == 'cuda': torch.cuda.synchronize()
    secs = time.perf_counter() - t
    ck.say('moe', f'one Qwen3-30B-A3B layer ({shape["num_experts"]} experts, {shape["num_experts_per_tok"]} active), full fine-tuning, '
           f'{length} tokens forward and backward in {secs:.2f} s = {length / secs:.0f} tokens/s, {peak_text(dev)} '
           f'(48 such layers make the 30B model: the multi-GPU preset shards them)', moe_layer_tokens_per_s=length / secs,
           moe_layer_peak_gib=peak_gb(dev))


def section_selfplay(ck: Check, preset):
    from spade_nb.cli import main
    from spade_nb.selfplay import Run
    dev, dtype = device_and_dtype(ck.dry)
    reset_peak(dev)  # the iteration's own peak, not an earlier section's
    model, tok = qwen3_model(TINY if ck.dry else QWEN3_4B, dtype, 'cpu' if ck.dry else dev)
    work = Path(tempfile.mkdtemp(prefix='gpu-check-run-'))
    try:
        model.save_pretrained(work/'model'); tok.save_pretrained(work/'model')
        del model
        from spade_nb.engines import _has
        backend = 'vllm' if _has('vllm') and not ck.dry else 'hf'  # the dry run's tiny shapes are below vLLM's CPU kernels (head_dim >= 32)
        argv = ['selfplay', '--preset', 'single-gpu', '--run-dir', str(work/'run'), '--set', f'llm.model={work/"model"}',
                '--set', f'llm.backend={backend}']
        for s in SCALE_DOWN + (['llm.dtype=float32', 'llm.device=cpu', 'llm.batch_size=8'] if ck.dry else []): argv += ['--set', s]
        t = time.perf_counter()
        code = main(argv)
        secs = time.perf_counter() - t
        if code != 0: raise RuntimeError(f'spade selfplay exited with {code}')
        (row,) = Run.load(work/'run').metrics
        stages = {k[8:]: round(v, 1) for k, v in row.items() if k.startswith('seconds_')}
        why = '' if backend == 'vllm' else (' (the fallback: vllm is not installed)' if not ck.dry else ' (dry run)')
        ck.say('selfplay', f'one scaled-down single-gpu iteration on the {backend} backend{why} in {secs:.0f} s, stages {stages}, '
               f'loss_agent {row.get("loss_agent")}', selfplay_seconds=secs, stages=stages, backend=backend)
        keys = {'design': ('tokens_design', 'seconds_design'), 'hints': ('tokens_hint', 'seconds_hints'), 'play': ('tokens_play', 'seconds_play')}
        rates = {stage: row[t] / row[s] for stage, (t, s) in keys.items() if row.get(t) and row.get(s)}
        ck.say('selfplay', f'generation on the {backend} backend inside the iteration (tokens generated / stage seconds, the sandbox '
               f'and parsing included, so a lower bound): ' + ', '.join(f'{k} {v:.0f} tokens/s' for k, v in rates.items()) +
               ' (compare the generation section\'s HF figure)', **{f'{k}_tokens_per_s': v for k, v in rates.items()})
        import torch
        from spade_nb.plan import plan
        gib = torch.cuda.get_device_properties(0).total_memory / 2**30 if dev == 'cuda' else 80.0
        p = plan(Run.load(work/'run').config, gpu_memory_gb=gib)
        ck.say('selfplay', f'spade plan for this iteration\'s config: ' + '; '.join(f'{r.name} {r.need / 2**30:.1f} GiB'
               for r in p.roles) + f' of {gib:.0f}; measured {peak_text(dev)}',
               planned_gib={r.name: r.need / 2**30 for r in p.roles}, measured_peak_gib=peak_gb(dev))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def section_seeded(ck: Check, preset):
    import vllm  # noqa: F401  (missing: the section is skipped and says so)
    from spade_nb.llm import LLMConfig
    from spade_nb.policy import load_policy, release
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from generation import seeded_cost
    dev, dtype = device_and_dtype(ck.dry)
    model, tok = qwen3_model(TINY_VLLM if ck.dry else QWEN3_4B, dtype, 'cpu')
    work = Path(tempfile.mkdtemp(prefix='gpu-check-seeded-'))
    try:
        model.save_pretrained(work/'model'); tok.save_pretrained(work/'model')
        del model
        batch, prompt_len = (8, 32) if ck.dry else (preset.llm.batch_size, 2048)
        vp = load_policy(LLMConfig(model=str(work/'model'), backend='vllm', batch_size=batch, max_context=4096,
                                   dtype='float32' if ck.dry else 'bfloat16', device='cpu' if ck.dry else 'auto'))
        import numpy as np
        rng = np.random.default_rng(0)
        try:
            r = seeded_cost(vp.llm, [rng.integers(100, 100000, prompt_len).tolist() for _ in range(batch)], 8 if ck.dry else 64,
                            1 if ck.dry or ck.quick else 2)
            adapter_check(ck, vp, rng)  # on the same engine: a second one would cost another start
        finally: release(vp)  # the engine's process waited for: nothing of it is left for a later section
        ck.say('seeded', f'vLLM, {batch} prompts of {prompt_len} tokens x {r["tokens"] // batch} new: every request seeded {r["seeded_s"]:.2f} s, '
               f'none seeded {r["unseeded_s"]:.2f} s, ratio {r["ratio"]:.3f} (goal <= 1.10: {"met" if r["ratio"] <= 1.10 else "NOT met"}); '
               f'seeded requests repeat their tokens: {r["repeats"]}', seeded_ratio=r['ratio'], seeded_repeats=r['repeats'])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def adapter_check(ck: Check, vp, rng):
    """vLLM with a trained adapter against the HF copy with it, before and after one more sleep/wake cycle (the engine asleep
    while the trainer steps, as in a run): an adapter that stops applying after wake shows as a gap near the adapter's own
    effect (HF with it against HF without it, on the same tokens), and fails the check."""
    from spade_nb.core import Sample
    from spade_nb.engines import logprob_gap
    from spade_nb.llm import SamplingParams
    from spade_nb.trainer import Trainer, TrainerConfig
    prompts = [rng.integers(100, 100000, 16).tolist() for _ in range(4)]
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=8, seed=0)
    outs = vp.generate(prompts, params)
    samples = [Sample(p + c.token_ids, [0] * len(p) + [1] * len(c.token_ids), [0.0] * len(p) + c.logprobs, 'agent',
                      float(j), group=f'p{i}') for i, (p, cs) in enumerate(zip(prompts, outs)) for j, c in enumerate(cs)]
    tr = Trainer(vp, TrainerConfig(lr=5e-2, lora_r=8, lora_alpha=16))
    with vp.offloaded(): tr.train_step(samples)  # the engine asleep while the trainer steps, awake after
    outs = vp.generate(prompts, params)  # the trained adapter, registered with the engine
    before = logprob_gap(vp, prompts, outs)
    effect = max(abs(a - b) for p, cs in zip(prompts, outs) for c in cs
                 for a, b in zip(vp.token_logprobs(p + c.token_ids, use_adapter=True)[len(p) - 1:],
                                 vp.token_logprobs(p + c.token_ids, use_adapter=False)[len(p) - 1:]))
    with vp.offloaded(): pass  # one more sleep/wake cycle
    after = logprob_gap(vp, prompts, vp.generate(prompts, params))
    ok = after < 0.5 * effect and before < 0.5 * effect
    ck.say('adapter', f'vLLM with the trained adapter against the HF copy: worst log-prob gap {before:.2e} after the step, '
           f'{after:.2e} after one more sleep/wake cycle; the adapter itself moves log-probs by up to {effect:.2e} '
           f'({"the adapter applies" if ok else "FAILED: the engine does not apply the adapter"}; sleep and wake '
           f'{"ran" if vp.on_gpu and vp.cfg.engine.sleep else "are GPU-only: not run here"})',
           adapter_gap=before, adapter_gap_after_wake=after, adapter_effect=effect)
    if not ok: raise RuntimeError(f'the engine does not apply the trained adapter (gap {before:.2e} / {after:.2e}, effect {effect:.2e})')


SECTIONS = {'env': section_env, 'generation': section_generation, 'trainer': section_trainer, 'moe': section_moe,
            'selfplay': section_selfplay, 'seeded': section_seeded}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--dry-run', action='store_true', help='tiny shapes on the CPU: checks the script in under a minute')
    ap.add_argument('--quick', action='store_true', help='fewer tokens and variants: every section within a borrowed GPU session')
    ap.add_argument('--sections', default=','.join(SECTIONS), help='comma-separated, from: ' + ', '.join(SECTIONS))
    ap.add_argument('--json', help='also write the figures to this file')
    a = ap.parse_args()
    from spade_nb.selfplay import load_config
    preset = load_config('single-gpu')
    ck = Check(a.dry_run, a.quick)
    t0 = time.perf_counter()
    for name in a.sections.split(','):
        if name not in SECTIONS: sys.exit(f'unknown section {name!r}; sections: {", ".join(SECTIONS)}')
        t = time.perf_counter()
        try:
            SECTIONS[name](ck, preset); ck.status[name] = 'ok'
        except ImportError as e:
            ck.status[name] = f'skipped: {e}'; print(f'[{name}] skipped: {e}')
        except Exception as e:  # one section failing does not stop the others
            ck.status[name] = f'failed: {type(e).__name__}: {e}'; traceback.print_exc(); print(f'[{name}] FAILED: {e}')
        print(f'[{name}] {time.perf_counter() - t:.0f} s', flush=True)
    print(f'gpu_check: {"dry run, " if a.dry_run else ""}{"quick, " if a.quick else ""}{time.perf_counter() - t0:.0f} s; ' +
          ', '.join(f'{k} {v}' for k, v in ck.status.items()))
    if a.json: Path(a.json).write_text(json.dumps({'dry_run': a.dry_run, 'quick': a.quick, 'status': ck.status, 'figures': ck.figures}, indent=1, default=str))
    return 0 if all(v == 'ok' or v.startswith('skipped') for v in ck.status.values()) else 1


if __name__ == '__main__':
    sys.exit(main())
