"""Cost of spade_nb's HF backend against raw `model.generate` on the same prompts and settings.

Both sides sample 16 prompts x 64 new tokens in one batch at temperature 1.0, top_p 1 with the same seed,
so they draw the same tokens and do the same work; ours also records behaviour log-probs and cuts and
decodes each completion. Reported: median wall time of each over alternating repetitions, and the ratio.
Goal: ratio <= 1.05. Runs in about a minute on 2 CPU cores.

    python benchmarks/generation.py [--reps 5] [--batch 16] [--new-tokens 64] [--model embedded]
"""
import argparse
import statistics
import time

import torch
from transformers import GenerationConfig

from spade_nb.llm import LLMConfig, SamplingParams, load_policy

TOPICS = ['the sea', 'prime numbers', 'a chess opening', 'photosynthesis', 'a haunted library', 'sorting algorithms',
          'the moon landing', 'a recipe for bread', 'volcanoes', 'a detective story', 'binary search', 'jazz',
          'the water cycle', 'a treasure map', 'compound interest', 'owls']


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--batch', type=int, default=16)
    ap.add_argument('--new-tokens', type=int, default=64)
    ap.add_argument('--model', default='embedded')
    a = ap.parse_args()
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


if __name__ == '__main__':
    main()
