"""An engine's adapter bookkeeping as the trainer drives it (`nbs/02a_engines.ipynb` shows the engine; the trainer comes later).

`HFEngine` (spade_nb.engines) is an engine that is HF generate, one job at a time, so it runs anywhere.
"""
from spade_nb.core import Sample
from spade_nb.engines import HFEngine
from spade_nb.llm import LLMConfig, SamplingParams, tiny_policy
from spade_nb.trainer import Trainer, TrainerConfig


def _batch(eng):
    prompt = eng.chat_ids([{'role': 'user', 'content': 'What is 2 + 2?'}])
    p = SamplingParams(n=2, max_new_tokens=8, seed=3)
    (a, b), (c, d) = eng.generate([prompt, prompt], p)
    def sample_of(x, r):
        return Sample(prompt + x.token_ids, [0] * len(prompt) + [1] * len(x.token_ids), [0.0] * len(prompt) + x.logprobs, 'agent', r, 'g')
    return prompt, p, [sample_of(x, r) for x, r in ((a, 1.0), (b, 0.0), (c, 1.0), (d, 0.0))]


def test_each_adapter_version_is_registered_once_and_the_last_one_retired():
    eng = HFEngine(tiny_policy(), LLMConfig())
    prompt, p, batch = _batch(eng)
    assert eng.registered == []  # no trained adapter yet: the base model generates
    trainer = Trainer(eng, TrainerConfig(lora_r=4, lr=1e-2, total_steps=10))
    trainer.train_step(batch)
    after = eng.generate([prompt], p)[0][0]
    v1, v2 = f'default-v1-{eng.tag}', f'default-v2-{eng.tag}'
    assert (eng.registered, after.adapter_version) == ([v1], 1)
    eng.generate([prompt], p)
    assert eng.registered == [v1]  # once per version
    trainer.train_step(batch)
    eng.generate([prompt], p)
    assert (eng.registered, eng.retired) == ([v1, v2], [v1])
    assert len(list(eng.adapter_dir.iterdir())) == 1  # the retired version's folder is gone
    eng.generate([prompt], p, use_adapter=False)
    assert len(eng.registered) == 2


def test_two_policies_never_share_an_engine_name():
    a, b = HFEngine(tiny_policy(), LLMConfig()), HFEngine(tiny_policy(), LLMConfig())
    for eng in (a, b):
        prompt, p, batch = _batch(eng)
        Trainer(eng, TrainerConfig(lora_r=4, lr=1e-2)).train_step(batch)
        eng.generate([prompt], p)
    assert a.tag != b.tag and not set(a.registered) & set(b.registered)  # two runs (or a resumed one) on one server


def test_with_separate_adapters_each_role_has_its_own_name_per_version():
    sep = HFEngine(tiny_policy(), LLMConfig())
    prompt, p, batch = _batch(sep)
    Trainer(sep, TrainerConfig(lora_r=4, lr=1e-2, separate_adapters=True)).train_step(batch)
    sep.generate([prompt], p.replace(adapter='designer'))
    sep.generate([prompt], p.replace(adapter='agent'))
    sep.generate([prompt], p)
    assert sep.registered == [f'designer-v1-{sep.tag}', f'agent-v1-{sep.tag}']  # the active adapter is the agent's
