"""The rollout engine's overhead: its wall time against raw `generate` on exactly the batches it issued.

The engine plays seed environments with the embedded model (sandbox workers, certification in a worker of
its own, recorded replays among the episodes, the audit in a fresh worker afterwards, action parsing,
environment steps, token-exact turn appends, bookkeeping). Every generate call it made is then
replayed with raw `model.generate` on the same ids, split and ordered the same way, with the same seed
(so the same tokens are drawn). Reported: engine wall time, summed raw time, and the overhead
(goal: at most 25%). About two minutes on 2 CPU cores.   python benchmarks/rollout.py [--turns 3]
"""
import argparse
import time

import torch
from transformers import GenerationConfig

from spade_nb.policy import load_policy
from spade_nb.rollout import EnvJob, RolloutConfig, play
from spade_nb.seeds import seed_sources


def raw_replay(policy, batch) -> float:
    "Raw generate on the sub-batches the backend formed from this call (sorted by length, chunked)."
    prompts = sorted(batch['prompts'], key=len)
    gc = GenerationConfig(do_sample=True, temperature=batch['temperature'], top_k=0, top_p=1.0,
                          max_new_tokens=batch['max_new_tokens'], pad_token_id=policy.pad_id, eos_token_id=policy.eos_ids)
    t = time.perf_counter()
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(batch['seed'])
        for k in range(0, len(prompts), policy.batch_size):
            chunk = prompts[k:k + policy.batch_size]
            width = max(map(len, chunk))
            ids = torch.tensor([[policy.pad_id] * (width - len(p)) + p for p in chunk])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk])
            policy.model.generate(input_ids=ids, attention_mask=mask, generation_config=gc)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--turns', type=int, default=3)
    ap.add_argument('--new-tokens', type=int, default=48)
    a = ap.parse_args()
    policy = load_policy()
    src = seed_sources()
    jobs = [EnvJob(n, src[n], seeds=[1, 2], hint='Think step by step.') for n in ('CodeBreakerEnv', 'NumberPathEnv', 'GridWalkEnv', 'CaesarEnv')]
    cfg = RolloutConfig(max_turns=a.turns, max_new_tokens=a.new_tokens, temperature=1.0)
    t = time.perf_counter()
    res = play(policy, jobs, cfg, seed=0)
    engine = time.perf_counter() - t
    raw = sum(raw_replay(policy, b) for b in res.stats['batches'])
    n_tok = sum(sum(e.loss_mask) for e in res.episodes)
    print(f'{len(res.episodes)} episodes, {len(res.stats["batches"])} generate calls, {n_tok} generated tokens')
    print(f'engine wall time {engine:.2f} s (generate {res.stats["generate_seconds"]:.2f} s, environments {res.stats["env_seconds"]:.2f} s; '
          f'{res.stats["replays"]} replays re-sent, {res.stats["audited"]} episodes audited)')
    print(f'raw generate on the same batches {raw:.2f} s')
    print(f'overhead {engine / raw - 1:+.1%}   (goal <= +25%: {"met" if engine / raw <= 1.25 else "NOT met"})')


if __name__ == '__main__':
    main()
