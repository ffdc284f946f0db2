"""Qwen3's chat template offline (the tokenizer ships with spade_nb): per-turn samples, their shared advantages,
and the trainer's masks and log-probs on them."""
import dataclasses

import numpy as np


def test_turns_of_one_episode_share_its_advantage():
    "Advantages are over episodes, not turns: a 3-turn win and a 1-turn loss are +1 and -1, whatever their turn counts."
    from spade_nb.core import Sample
    from spade_nb.trainer import compute_advantages
    def turn(ep, k, reward):
        return Sample([1, 2, 3], [0, 1, 1], [0.0, -1.0, -1.0], 'agent', reward, 'env', episode_id=ep, meta={'turn': k})
    samples = [turn('a', k, 1.0) for k in range(3)] + [turn('b', 0, 0.0)]
    out, stats = compute_advantages(samples)
    adv = {(s.episode_id, s.meta['turn']): s.advantage for s in out}
    assert np.allclose([adv['a', k] for k in range(3)], 1.0, atol=1e-4) and np.isclose(adv['b', 0], -1.0, atol=1e-4)
    whole = [dataclasses.replace(s, meta={}) for s in samples]  # the same rewards as four independent samples
    assert not np.isclose(compute_advantages(whole)[0][0].advantage, 1.0, atol=1e-3)


def test_a_qwen3_episode_trains_turn_by_turn_on_what_the_model_saw():
    "A real rollout on Qwen3's template (a tiny random Qwen3): the trainer's log-probs on each turn's sample are the behaviour ones, and a step runs."
    import torch
    from spade_nb.llm import per_turn, tiny_qwen3_policy
    from spade_nb.rollout import EnvJob, RolloutConfig, play
    from spade_nb.seeds import seed_sources
    from spade_nb.trainer import Trainer, TrainerConfig
    policy = tiny_qwen3_policy(seed=1, max_context=4096)
    assert per_turn(policy)
    res = play(policy, [EnvJob('c', seed_sources()['CaesarEnv'], seeds=[1, 2], plays=2)],
               RolloutConfig(max_turns=2, max_new_tokens=12, temperature=0.7), seed=0)
    samples = res.training_samples()
    assert len(samples) == sum(e.turns for e in res.episodes) > len(res.episodes)  # one sample per turn
    tr = Trainer(policy, TrainerConfig(lora_r=4))
    for s in samples:
        ids, att, mask, behav, _, temps = tr._tensors([dataclasses.replace(s, advantage=0.0)])
        with torch.no_grad(): logp = tr._logp(ids, att, temps)
        assert mask.sum() == 12 or s.meta['ended_by'] == 'env'
        assert float(((logp - behav).abs() * mask).max()) < 1e-4
    for e, r in zip(res.episodes, [1.0, 0.0, 1.0, 0.0]): e.rewards = [r]  # rewards that differ, so there is a gradient
    metrics = tr.train_step(res.training_samples())
    assert np.isfinite(metrics['loss']) and policy.adapter_version == 1
