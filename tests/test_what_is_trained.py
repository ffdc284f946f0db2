"""What the designer and the agent are trained on (issue 28): copies, each role's share, the engine's distribution, the curve's
origin. Each test here failed on the commit before its fix (17ee098)."""
import tempfile
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from spade_nb.regret import RewardConfig


def _memory_with(*names):
    from spade_nb.admission import admit_many
    from spade_nb.memory import EnvMemory
    from spade_nb.seeds import seed_sources
    mem = EnvMemory(Path(tempfile.mkdtemp())/'memory.sqlite')
    codes = [seed_sources()[n] for n in names]
    for code, v in zip(codes, admit_many(codes, [[1, 2, 3, 4]] * len(codes))):
        mem.add_code(code, v, skill='reasoning_game', origin='seed', protected=True, iteration=-1)
    return mem


def _frontier_plays(mem, env_id, it=0):
    "Both arms on four seeds, two plays each: the hint always wins, the plain arm wins one play in two."
    eps = [NS(seed=s, hint=h, play=k, ret=float(h or k == 0)) for s in (1, 2, 3, 4) for h in (False, True) for k in (0, 1)]
    mem.record_plays(env_id, it, eps)


def _pending(env_id, it=0):
    from spade_nb.core import Sample
    from spade_nb.selfplay import PendingDesign
    sample = Sample([1, 2], [0, 1], [0.0, -1.0], 'designer', 0.0, 'reasoning_game', episode_id=f'design-{it}-{env_id}')
    return PendingDesign(env_id, None, sample, iteration=it, skill='reasoning_game')


# -- 1. copies and near-copies never beat trying ---------------------------------------------------------------------------

def test_a_near_copy_earns_its_window_reward_scaled_by_its_novelty():
    "An exemplar with one line changed is admitted as new; the same plays pay it a fraction of what a fresh design earns."
    from spade_nb.admission import admit
    from spade_nb.seeds import seed_sources
    from spade_nb.selfplay import load_config, window_reward
    mem, cfg = _memory_with('GridWalkEnv', 'CodeBreakerEnv'), load_config('tiny-cpu')
    src = seed_sources()
    tweak = src['GridWalkEnv'].replace("f'You are at {self.pos}. {self._open()}', 0.0, False, out, {}",
                                       "f'You are at {self.pos} after {self.turn} moves. {self._open()}', 0.0, False, out, {}")  # new behaviour, one line
    assert tweak != src['GridWalkEnv']
    near, new = mem.add_code(tweak, admit(tweak), skill='reasoning_game', iteration=0)
    fresh, _ = mem.add_code(src['CaesarEnv'], admit(src['CaesarEnv']), skill='reasoning_game', iteration=0)
    assert new and mem.get(near).max_similarity >= 0.8 > 0.5 > mem.get(fresh).max_similarity
    for i in (near, fresh): _frontier_plays(mem, i)
    full, copied = window_reward(mem, _pending(fresh), cfg, 0), window_reward(mem, _pending(near), cfg, 0)
    assert full.reward == pytest.approx(1.0) and full.novelty == 1.0
    factor = (1 - mem.get(near).max_similarity) / (1 - cfg.reward.novelty_from)
    assert copied.reward == pytest.approx(factor) and copied.reward < 0.75 * full.reward
    off = cfg.replace(reward=cfg.reward.replace(novelty_from=None))
    assert window_reward(mem, _pending(near), off, 0).reward == pytest.approx(1.0)  # the switch


def test_a_verbatim_copy_never_earns_more_than_a_rejected_design():
    from spade_nb.core import ConfigError
    rc = RewardConfig()
    assert rc.copy_penalty() <= rc.inadmissible  # the old default paid a copy -0.5, a timeout's penalty, above a failed attempt's -1
    with pytest.raises(ConfigError, match='reward.inadmissible'): rc.replace(duplicate=rc.inadmissible + 0.1)


def test_every_design_whose_window_closed_has_a_reward_or_a_named_reason():
    from spade_nb.selfplay import load_config, reward_stage
    mem, cfg = _memory_with('GridWalkEnv', 'CodeBreakerEnv', 'CaesarEnv'), load_config('tiny-cpu')
    _frontier_plays(mem, 1)
    mem.update_scores(2, iteration=0, plays=16, note='hint leaked'); _frontier_plays(mem, 2)
    out = reward_stage(mem, [_pending(1), _pending(2), _pending(3)], cfg, 0)  # 3 was never played
    assert [r.why for r in out.rows] == [None, 'hint_leaked', 'unplayed'] and out.unrewarded == {'hint_leaked': 1, 'unplayed': 1}
    assert out.rows[0].reward == pytest.approx(1.0) and out.novelty_scaled == 0


# -- 2. each role's share of the update ----------------------------------------------------------------------------------------

def _toy(n=12, seed=0):
    "Samples of both roles (a third designer), two groups each, random trained tokens and behaviour log-probs."
    import numpy as np
    from spade_nb.core import Sample
    rng, out = np.random.default_rng(seed), []
    for i in range(n):
        L = int(rng.integers(8, 20)); ids = rng.integers(3, 1000, L).tolist()
        mask = [0] * 4 + [int(x) for x in rng.integers(0, 2, L - 4)]
        out.append(Sample(ids, mask, [-float(x) * m for x, m in zip(rng.random(L), mask)], 'agent' if i % 3 else 'designer',
                          float(rng.random()), group=f'g{i % 2}'))
    return out


def _step(cfg, samples, kind=None):
    from spade_nb.llm import tiny_policy
    from spade_nb.trainer import Trainer
    pol = tiny_policy(seed=1)
    if kind: pol.kind = kind
    tr = Trainer(pol, cfg)
    return tr, tr.train_step(samples)


@pytest.mark.parametrize('separate', [False, True])
def test_each_roles_gradient_norm_is_what_that_role_alone_would_give(separate):
    "The mixed step's per-role norms, rescaled by the token counts token_mean divides by, equal one-role steps' norms from the same start."
    from spade_nb.trainer import TrainerConfig
    cfg = TrainerConfig(grad_clip=1e9, separate_adapters=separate)
    both = _toy()
    tok = {r: sum(sum(s.loss_mask[1:]) for s in both if s.role == r) for r in ('agent', 'designer')}
    _, m = _step(cfg, both)
    _, ma = _step(cfg, [s for s in both if s.role == 'agent'])
    _, md = _step(cfg, [s for s in both if s.role == 'designer'])
    n = tok['agent'] + tok['designer']
    assert m['grad_norm_agent'] * n / tok['agent'] == pytest.approx(ma['grad_norm'], rel=1e-4)
    assert m['grad_norm_designer'] * n / tok['designer'] == pytest.approx(md['grad_norm'], rel=1e-4)
    assert m['designer_token_share'] == pytest.approx(tok['designer'] / n)
    assert m['designer_grad_share'] == pytest.approx(m['grad_norm_designer'] / (m['grad_norm_agent'] + m['grad_norm_designer']))
    assert (ma['designer_grad_share'], md['designer_grad_share'], ma['grad_norm_designer']) == (0.0, 1.0, 0.0)
    if separate: assert m['grad_norm'] == pytest.approx((m['grad_norm_agent'] ** 2 + m['grad_norm_designer'] ** 2) ** 0.5, rel=1e-5)  # disjoint adapters


def test_the_single_gpu_preset_scales_the_designer_as_its_comment_argues():
    from spade_nb.selfplay import load_config
    text = (Path(__file__).resolve().parents[1]/'configs'/'single-gpu.yaml').read_text()
    assert load_config('single-gpu').trainer.designer_adv_scale == 32.0 and 'argued, not measured' in text


# -- 3. the engine's distribution and the trainer's -------------------------------------------------------------------------

def test_the_behaviour_gap_is_measured_on_fresh_rows_and_the_correction_is_on_for_engines():
    "Behaviour log-probs 0.25 below the trainer's on every trained token of fresh rows (a stale row far off): the gap reads 0.25."
    import torch
    from spade_nb.core import Sample
    from spade_nb.trainer import TrainerConfig
    tr, _ = _step(TrainerConfig(), _toy()[:1])
    samples = _toy()
    with torch.no_grad():
        for s in samples:
            ids, att, mask, *_ , temps = tr._tensors([Sample(**{**s.to_dict(), 'advantage': 0.0})])
            lp = tr._logp(ids, att, temps, mask)[0].tolist()
            s.logprobs = [(x - 0.25) if m else 0.0 for x, m in zip(lp, mask[0].tolist())]
    stale = Sample(**{**samples[1].to_dict(), 'logprobs': [x - 5.0 for x in samples[1].logprobs], 'staleness': 2, 'episode_id': 'old'})
    tr.opt.step = lambda *a, **k: None  # keep the weights the log-probs were taken with
    m = tr.train_step(samples + [stale])
    assert m['behaviour_gap'] == pytest.approx(0.25, abs=1e-4) and m['tis_cap'] is None  # the trainer's own model sampled: no correction
    for kind, cap in (('vllm', 2.0), ('openai', 2.0), (None, None)):
        tr_k, m_k = _step(TrainerConfig(), _toy(), kind=kind)
        assert tr_k.tis_cap == cap and m_k['tis_cap'] == cap, kind
    assert _step(TrainerConfig(tis_cap=3.0), _toy(), kind='vllm')[0].tis_cap == 3.0  # set: as set


@pytest.mark.parametrize('llm,says', [
    (dict(backend='vllm', quantization='nf4'), 'bitsandbytes'),
    (dict(backend='openai', servers=['http://127.0.0.1:1'], quantization='nf4'), 'quantization=none'),
    (dict(backend='vllm', quantization='int8'), 'int8')])
def test_qlora_with_an_engine_that_serves_other_weights_refuses_and_says_what_to_do(llm, says):
    from spade_nb.core import ConfigError
    from spade_nb.llm import LLMConfig
    with pytest.raises(ConfigError, match='quantization') as e: LLMConfig.from_dict(llm)
    assert says in str(e.value)
    LLMConfig.from_dict(dict(backend='vllm', quantization='nf4', engine={'args': {'quantization': 'bitsandbytes'}}))  # the engine quantizes the same base


# -- 4. the held-out curve starts at zero updates and ends at the last -------------------------------------------------------

def test_the_heldout_curve_has_its_origin_and_its_end_whatever_eval_interval_says(tmp_path):
    from spade_nb.selfplay import Run, SelfPlay, load_config
    from spade_nb.testing import FAST_ITERATION, counting_script, known_good_design, scripted_policy
    cfg = load_config('tiny-cpu', overrides=[*FAST_ITERATION, 'selfplay.iterations=2', 'selfplay.eval_interval=5'])
    sp = SelfPlay.start(cfg, tmp_path/'run', policy=scripted_policy(counting_script(known_good_design())))
    first, last = sp.run()
    assert first['win_rate_heldout_origin'] is not None and first['heldout_origin_lo'] <= first['win_rate_heldout_origin'] <= first['heldout_origin_hi']
    assert first['win_rate_heldout'] is not None and last['win_rate_heldout'] is not None  # iteration 0 (0 % 5) and the final one
    assert last['win_rate_heldout_origin'] is None and last['heldout_episodes'] == first['heldout_episodes']
    assert first['adapter_version'] == 1  # the origin was measured before this update: on the base model
    assert [r['iteration'] for r in Run.load(tmp_path/'run').metrics] == [0, 1]
