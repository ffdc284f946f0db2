"""The learning signal's bookkeeping (issue 14): each test here failed on the commit before its fix."""
import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import pytest

from spade_nb.regret import RewardConfig, designer_reward, env_metrics, estimate_regret

LEVELS, LIFTS = np.array([0.02, 0.1, 0.5, 0.9, 0.98]), np.array([0.0, 0.1, 0.3, 0.5])
TRUE = float(np.mean([[min(lv + lf, 1) - lv for lf in LIFTS] for lv in LEVELS]))


# -- 1. the regret interval holds its level at the loop's seed counts ----------------------------------------------------

@pytest.mark.parametrize('seeds,plays', [(2, 2), (4, 2), (8, 2)])
def test_the_regret_interval_covers_the_population_regret(seeds, plays):
    "Bernoulli plays, hint lift varying by seed: a nominal 90% interval covers E_seed[p_hint - p_plain] at least 85% of the time."
    rng, hits = np.random.default_rng(seeds), 0
    reps = 300
    for _ in range(reps):
        lv, lf = rng.choice(LEVELS, seeds), rng.choice(LIFTS, seeds)
        plain = (rng.random((seeds, plays)) < lv[:, None]).astype(float)
        hint = (rng.random((seeds, plays)) < np.minimum(lv + lf, 1)[:, None]).astype(float)
        e = estimate_regret(hint.ravel(), plain.ravel(), groups=np.repeat(np.arange(seeds), plays), level=0.9)
        hits += e.lo <= TRUE <= e.hi
    assert hits / reps >= 0.85, (seeds, plays, hits / reps)  # the percentile bootstrap: 0.43, 0.70, 0.80


def test_unpaired_env_metrics_do_not_crash():
    from types import SimpleNamespace as NS
    eps = [NS(env_id='a', seed=s, hint=h, play=0, ret=float(h or s == 1), win=bool(h or s == 1), turns=1, parse_failures=0)
           for s in (1, 2, 3) for h in (False, True)]
    m = env_metrics(eps, paired=False)['a']
    assert m.regret == pytest.approx(1 - 1 / 3) and m.estimate.paired is False


# -- 8, 11. the win-rate rewards need no hint; each failure has its own penalty -------------------------------------------

def test_win_rate_rewards_need_no_hint_and_failures_have_their_own_penalties():
    rc = RewardConfig()
    assert designer_reward(rc.replace(variant='learnability'), None, 0.5, hint_leaked=True) == pytest.approx(0.25)
    assert designer_reward(rc.replace(variant='solve_rate'), None, 0.5) == pytest.approx(1.0)
    got = {f: designer_reward(rc.replace(crash=-0.2, memory=-0.3, forbidden_syscall=-0.9), None, 0.5, failure=f)
           for f in ('timeout', 'crash', 'memory', 'forbidden_syscall')}
    assert got == {'timeout': -0.5, 'crash': -0.2, 'memory': -0.3, 'forbidden_syscall': -0.9}


# -- 4, 5. a copy never collects another environment's score; replay reaches older environments ------------------------------

def _loop_parts():
    from spade_nb.admission import AdmissionConfig, admit_many
    from spade_nb.core import Seeds
    from spade_nb.sandbox import SandboxLimits
    from spade_nb.memory import EnvMemory
    from spade_nb.seeds import seed_sources
    from spade_nb.selfplay import load_config
    from spade_nb.testing import FAST_ITERATION, counting_script, known_good_design, scripted_policy
    cfg = load_config('tiny-cpu', overrides=FAST_ITERATION)
    mem = EnvMemory(Path(tempfile.mkdtemp())/'memory.sqlite')
    two = [seed_sources()[n] for n in ('GridWalkEnv', 'CodeBreakerEnv')]
    # generous deadlines: on a loaded CI machine a default-limit admission can fail, and an edit test then sees one parent
    slack = AdmissionConfig(limits=SandboxLimits(call_timeout=30.0, load_timeout=30.0, start_timeout=60.0), budget_seconds=300)
    verdicts = admit_many(two, [[1, 2, 3, 4], [5, 6, 7, 8]], config=slack)
    assert all(v.ok for v in verdicts), [(v.reason, v.details) for v in verdicts]
    for code, v in zip(two, verdicts):
        mem.add_code(code, v, skill='reasoning_game', origin='seed', protected=True, iteration=-1)
    return cfg, mem, scripted_policy(counting_script(known_good_design())), Seeds(0)


def test_a_duplicate_design_gets_its_own_penalty_not_the_original_score():
    from spade_nb.selfplay import admit_designs, write_designs
    cfg, mem, policy, seeds = _loop_parts()
    first = admit_designs(write_designs(policy, mem, None, cfg, seeds.child('a')), mem, {}, cfg, 0, seeds.child('a'))
    again = admit_designs(write_designs(policy, mem, None, cfg, seeds.child('b')), mem, {}, cfg, 1, seeds.child('b'))
    assert first.new_envs and not again.new_envs and again.counts.duplicates == 1
    dup = again.pending[0]
    assert dup.reward == cfg.reward.inadmissible == cfg.reward.copy_penalty()  # never the original's regret, and never more than a failed attempt (issue 28)
    assert [r.reason for r in again.rows] == ['duplicate', 'syntax'] and 'duplicate' not in again.counts.rejected_by_reason


def test_replay_draws_from_older_environments_only():
    from spade_nb.selfplay import admit_designs, write_designs
    cfg, mem, policy, seeds = _loop_parts()
    designed = admit_designs(write_designs(policy, mem, None, cfg, seeds), mem, {}, cfg, 0, seeds)
    new = designed.new_envs
    picks = [i for k in range(50) for i in mem.sample_replay(2, np.random.default_rng(k), iteration=0, replace=False, exclude=new)]
    assert picks and not set(picks) & set(new)  # a new design (unplayed: top priority) used to take the slot and be dropped


# -- 6. an iteration without a regret keeps the last measured one ---------------------------------------------------------

def test_a_leaked_hint_or_a_failure_keeps_the_last_measured_scores():
    from spade_nb.memory import EnvMemory
    from spade_nb.rollout import Episode, RolloutResult
    from spade_nb.selfplay import HintOutcome, PlayOutcome, score_stage
    cfg, mem, _, seeds = _loop_parts()
    mem.update_scores(1, iteration=0, plays=4, regret=0.25, regret_lo=0.1, regret_hi=0.4, win_rate_hint=0.75, win_rate_nohint=0.5)
    mem.update_scores(2, iteration=0, plays=4, regret=0.5, regret_lo=0.2, regret_hi=0.8, win_rate_hint=1.0, win_rate_nohint=0.5)
    ep = lambda env, s, ret, ended='env': Episode(env, s, False, 0, [1], [0], [0.0], 1, rewards=[ret], ended_by=ended, turns=1)
    res = RolloutResult([ep(1, 3, 1.0), ep(1, 4, 0.0), ep(2, 3, 0.0, 'timeout')], {}, {2: 'timeout'})
    score_stage(mem, PlayOutcome(res, 2), HintOutcome(leaked={1}), cfg, 1, seeds)
    one, two = mem.get(1), mem.get(2)
    assert (one.regret, one.regret_lo, one.win_rate_nohint, one.plays) == (0.25, 0.1, 0.5, 6)  # the win rate was measured again
    assert (two.regret, two.win_rate_nohint, two.last_played) == (0.5, 0.5, 1)  # a timeout measured nothing: not a 0
    assert [h['note'] for h in mem.history(1)] == [None, 'hint leaked'] and mem.history(2)[-1]['note'] == 'failed: timeout'


# -- 9. settings that nothing read --------------------------------------------------------------------------------------

@pytest.mark.parametrize('key,says', [('designer.use_corpus=false', 'selfplay.use_corpus'), ('designer.use_memory=false', 'selfplay.use_memory'),
                                      ('hints.train_on_hints=true', 'never trained')])
def test_keys_that_nothing_read_are_errors_that_say_where_to_go(key, says):
    from spade_nb.core import ConfigError
    from spade_nb.selfplay import load_config
    with pytest.raises(ConfigError) as e:
        load_config('tiny-cpu', overrides=[key])
    assert key.split('=')[0] in str(e.value) and says in str(e.value)


def test_the_blend_weight_and_plateau_band_are_keys():
    from spade_nb.regret import RegretEstimate
    from spade_nb.selfplay import load_config
    cfg = load_config('tiny-cpu', overrides=['reward.blend_regret_weight=1.0', 'reward.plateau_lo=0.1'])
    assert designer_reward(cfg.reward, RegretEstimate(0.15, 0.1, 0.2, 4), 0.0) == pytest.approx(1.0)  # all regret, none plateau


# -- 2. each sample's log-probs are recomputed at the temperature it was sampled at ----------------------------------------

def test_fresh_samples_of_each_role_have_ratio_one():
    "Designs sampled at 0.8 and episodes at 0.7 (the roles differ): the trainer's recomputed log-probs match the behaviour ones."
    import torch
    from spade_nb.core import Sample
    from spade_nb.llm import tiny_policy
    from spade_nb.rollout import EnvJob, RolloutConfig, play
    from spade_nb.seeds import seed_sources
    from spade_nb.selfplay import PendingDesign, admit_designs, write_designs
    from spade_nb.trainer import Trainer, TrainerConfig
    cfg, mem, _, seeds = _loop_parts()
    cfg = cfg.replace(designer=cfg.designer.replace(temperature=0.8, max_new_tokens=24))
    policy = tiny_policy(seed=3, max_context=2048)
    designed = admit_designs(write_designs(policy, mem, None, cfg, seeds), mem, {}, cfg, 0, seeds)
    designer = [d.sample for d in designed.pending]
    res = play(policy, [EnvJob('c', seed_sources()['CaesarEnv'], seeds=[1])], RolloutConfig(max_turns=2, max_new_tokens=12, temperature=0.7), seed=0)
    agent = res.training_samples(RolloutConfig())
    assert {s.temperature for s in designer} == {0.8} and {s.temperature for s in agent} == {0.7}
    tr = Trainer(policy, TrainerConfig())
    for s in designer + agent:
        ids, att, mask, behav, _, temps = tr._tensors([dataclasses.replace(s, advantage=0.0)])
        with torch.no_grad(): logp = tr._logp(ids, att, temps)
        gap = float(((logp - behav).abs() * mask).max())
        assert mask.sum() > 0 and gap < 1e-4, (s.role, gap)  # |ratio - 1| < 1e-4 on every trained token


def test_a_truncated_nucleus_cannot_be_trained():
    from spade_nb.core import Sample
    from spade_nb.llm import tiny_policy
    from spade_nb.trainer import Trainer, TrainerConfig
    s = Sample([5, 6, 7], [0, 1, 1], [0, -1, -1], 'agent', 1.0, 'g', advantage=1.0, top_p=0.9)
    with pytest.raises(ValueError, match='top_p'):
        Trainer(tiny_policy(seed=1), TrainerConfig()).train_step([s])


# -- 3. with separate adapters each role generates with its own -----------------------------------------------------------

def test_with_separate_adapters_designs_come_from_the_designer_adapter():
    import torch
    from spade_nb.designer import DesignerConfig, build_prompt, design
    from spade_nb.llm import tiny_policy
    from spade_nb.trainer import Trainer, TrainerConfig
    policy = tiny_policy(seed=2, max_context=2048)
    tr = Trainer(policy, TrainerConfig(separate_adapters=True))
    with torch.no_grad():  # the designer's adapter has learned something the agent's has not
        for n, p in tr.model.named_parameters():
            if 'lora_B' in n and '.designer.' in n: p.add_(0.3 * torch.randn_like(p))
    dcfg = DesignerConfig(max_new_tokens=16, temperature=1.0)
    (d,) = design(policy, [build_prompt(policy, 'reasoning_game', cfg=dcfg)], dcfg, seed=0)
    ids = torch.tensor([d.prompt.ids + d.completion.token_ids]); n = len(d.completion.token_ids)
    gaps = {}
    for role in ('designer', 'agent'):
        tr.model.set_adapter(role)
        with torch.no_grad(): lp = tr._logp(ids, torch.ones_like(ids), torch.ones(1))[0, -n:]
        gaps[role] = float((lp - torch.tensor(d.completion.logprobs)).abs().max())
    tr.model.set_adapter('agent')
    assert gaps['designer'] < 1e-4 < gaps['agent'], gaps  # sampled from the designer's adapter, not the active (agent) one


# -- 7. each design's sample waits its skill's delay, and a stale sample is corrected -----------------------------------------

def test_designer_samples_wait_their_skills_delay():
    from spade_nb.rollout import RolloutResult
    from spade_nb.selfplay import PendingDesign, PlayOutcome, update_stage
    cfg, _, _, _ = _loop_parts()
    cfg = cfg.replace(selfplay=cfg.selfplay.replace(designer_delay=2, designer_delays={'tool_use': 3}))
    seen = []
    class Recorder:
        def train_step(self, samples): seen.append(samples); return {'loss_agent': 0.0, 'loss_designer': 0.0}
    pol = type('P', (), {'adapter_version': None})()
    sample = dict(token_ids=[1, 2], loss_mask=[0, 1], logprobs=[0.0, -1.0], role='designer', reward=0.0, group='g')
    buffer = [PendingDesign(None, 0.5, {**sample, 'group': s}, iteration=0, skill=s) for s in ('reasoning_game', 'tool_use')]
    nothing = PlayOutcome(RolloutResult([], {}, {}), 0)
    trained = []
    for it in range(4):
        out = update_stage(Recorder(), pol, nothing, None, buffer, cfg, it)
        buffer = out.buffer
        trained.append([(s.group, s.staleness) for s in seen[-1]])
    assert trained == [[], [], [('reasoning_game', 2)], [('tool_use', 3)]]  # the start delay trained both at iteration 2, unmarked


def test_a_stale_sample_is_corrected_by_truncated_importance_sampling():
    "Behaviour probabilities a quarter of today's: a fresh sample's ratio 4 is clipped (no gradient); a stale one is re-based and weighted min(2, 4)."
    import torch
    from spade_nb.core import Sample
    from spade_nb.llm import tiny_policy
    from spade_nb.trainer import Trainer, TrainerConfig
    losses = {}
    for staleness in (0, 3):
        tr = Trainer(tiny_policy(seed=1), TrainerConfig(grad_clip=1e9))
        ids = [5, 6, 7, 8, 9]
        probe = Sample(ids, [0, 1, 1, 1, 1], [0.0] * 5, 'agent', 1.0, 'g', advantage=1.0)
        t = tr._tensors([probe])
        with torch.no_grad(): cur = tr._logp(t[0], t[1], t[5])[0].tolist()
        s = Sample(ids, [0, 1, 1, 1, 1], [0.0] + [c - float(np.log(4)) for c in cur[1:]], 'agent', 1.0, 'g', advantage=1.0, staleness=staleness)
        m = tr.train_step([s])
        losses[staleness] = (m['loss_agent'], m['grad_norm'])
    assert losses[0][0] == pytest.approx(-1.28, abs=1e-3) and losses[0][1] == pytest.approx(0.0, abs=1e-6)
    assert losses[3][0] == pytest.approx(-2.0, abs=1e-3) and losses[3][1] > 0


# -- 10. edits start from different parents; 11. a sequence past max_seq_len is dropped, never cut ---------------------------

def test_edits_spread_over_parents_and_the_spread_is_reported():
    from spade_nb.selfplay import admit_designs, write_designs
    cfg, mem, policy, seeds = _loop_parts()
    for env_id, reg in ((1, 0.4), (2, 0.3)):
        mem.update_scores(env_id, iteration=0, plays=4, regret=reg, regret_lo=reg - 0.1, regret_hi=reg + 0.1, win_rate_hint=0.9, win_rate_nohint=0.5)
    cfg = cfg.replace(designer=cfg.designer.replace(edit_share=1.0, n_positive=1), selfplay=cfg.selfplay.replace(designs_per_iteration=4))
    drafts = write_designs(policy, mem, None, cfg, seeds)
    assert [d.prompt.mode for d in drafts] == ['edit'] * 4
    parents = [d.prompt.parent.env_id for d in drafts]
    assert parents[:2] in ([1, 2], [2, 1]), parents  # the second design edits the other environment (it was always the top one)
    counts = admit_designs(drafts, mem, {}, cfg, 1, seeds).counts
    assert (counts.edits, counts.edit_parents) == (4, 2)


def test_a_sequence_longer_than_max_seq_len_is_dropped_and_counted():
    from spade_nb.core import Sample
    from spade_nb.llm import tiny_policy
    from spade_nb.trainer import Trainer, TrainerConfig
    short = Sample([5, 6, 7, 8], [0, 1, 1, 1], [0, -1.0, -1.0, -1.0], 'agent', 1.0, 'g', advantage=1.0)
    long = Sample(list(range(5, 17)), [0] * 6 + [1] * 6, [0.0] * 6 + [-1.0] * 6, 'agent', 1.0, 'g', advantage=1.0)
    m = Trainer(tiny_policy(seed=1), TrainerConfig(max_seq_len=8)).train_step([short, long])
    assert (m['too_long'], m['samples'], m['trained_tokens']) == (1, 1, 3)  # it was cut to 8 tokens, its reward-bearing end lost


# -- issue 27: the designer's reward as the method computes it ------------------------------------------------------------

def _episodes(outcome, iterations=(0,), seeds=(1, 2, 3, 4), plays=2, hint=True):
    "Real rollout `Episode`s of one environment: `outcome(seed, hint, play, iteration)` -> return; and each one's iteration."
    from spade_nb.rollout import Episode
    eps, its = [], []
    for t in iterations:
        for s in seeds:
            for h in ((False, True) if hint else (False,)):
                for k in range(plays):
                    eps.append(Episode('e', 100 * t + s, h, k, [1], [0], [0.0], 1, rewards=[float(outcome(s, h, k, t))], ended_by='env', turns=1))
                    its.append(t)
    return eps, its


def test_the_paired_interval_wins_where_seeds_are_plentiful():
    "64 seeds, a hint that adds exactly 0.3 to a continuous return: the guard bound at every size (parent: 0.288 paired, 0.286 unpaired)."
    rng = np.random.default_rng(0)
    plain = rng.random(64) * 0.7
    paired, unpaired = estimate_regret(plain + 0.3, plain), estimate_regret(plain + 0.3, rng.random(64) * 0.7, paired=False)
    assert paired.lo <= 0.3 <= paired.hi
    assert paired.width <= 0.7 * unpaired.width, (paired.width, unpaired.width)


@pytest.mark.parametrize('variant', ['blend', 'regret', 'learnability', 'solve_rate'])
def test_an_environment_the_seed_decides_earns_no_more_than_a_trivial_one(variant):
    "Won on two seeds and lost on two, hint or not: a win rate of 0.5 paid 0.6 of the blend's maximum (parent); now no more than an always-won one."
    from spade_nb.regret import env_reward
    rc = RewardConfig(variant=variant)
    split, trivial = _episodes(lambda s, h, k, t: s <= 2), _episodes(lambda s, h, k, t: True)
    frontier = _episodes(lambda s, h, k, t: h or k == 0)  # 50% on every seed, the hint wins it
    assert env_reward(rc, *split) <= env_reward(rc, *trivial)
    assert env_reward(rc, *frontier) >= env_reward(rc, *trivial) + (0.2 if variant == 'learnability' else 0.5)
    # and with the hint winning the split's lost seeds: the regret stays (the hint does help), the plateau does not
    hinted_split = _episodes(lambda s, h, k, t: s <= 2 or h)
    if variant == 'blend': assert env_reward(rc, *hinted_split) == pytest.approx(0.4)  # parent: 1.0, a frontier's reward


def test_learning_progress_rewards_the_environment_the_agent_improves_on():
    from spade_nb.regret import env_reward, reward_parts
    ref = RewardConfig(blend={'regret': 0.5, 'learning_progress': 0.5})
    rising = _episodes(lambda s, h, k, t: h or k < t, iterations=(0, 1, 2))  # 0, 0.5, 1 over the window
    flat = _episodes(lambda s, h, k, t: h or k == 0, iterations=(0, 1, 2))  # 0.5 throughout
    lp = RewardConfig(variant='learning_progress')
    assert env_reward(lp, *rising) == pytest.approx(1.0) and env_reward(lp, *flat) == pytest.approx(0.0)
    assert env_reward(ref, *rising) > env_reward(ref, *flat) + 0.4
    falling = reward_parts(lp, *_episodes(lambda s, h, k, t: k >= t, iterations=(0, 1, 2), hint=False))
    assert falling.reward < 0 and falling.masked


def test_a_designs_reward_is_computed_from_its_window_when_its_delay_is_up():
    "Two iterations kept in the memory: the reward at training time rests on both, differs from the first alone, and a negative blend is masked."
    from spade_nb.selfplay import PendingDesign, PlayOutcome, due_designs, reward_stage, update_stage
    from spade_nb.rollout import RolloutResult
    cfg, mem, _, _ = _loop_parts()
    cfg = cfg.replace(selfplay=cfg.selfplay.replace(designer_delay=1))
    for t in (0, 1):  # environment 1: lost at first, won later; environment 2: won at first, lost later
        mem.record_plays(1, t, _episodes(lambda s, h, k, t: h or t == 1, iterations=(t,), hint=t == 0)[0])
        mem.record_plays(2, t, _episodes(lambda s, h, k, t: t == 0 or (t == 1 and k == 0 and s <= 2), iterations=(t,), hint=t == 0)[0])
    sample = dict(token_ids=[1, 2], loss_mask=[0, 1], logprobs=[0.0, -1.0], role='designer', reward=0.0, group='reasoning_game')
    pend = [PendingDesign(i, None, {**sample, 'episode_id': f'd{i}'}, iteration=0, skill='reasoning_game') for i in (1, 2)]
    assert due_designs(pend, cfg, 0) == []
    out = reward_stage(mem, due_designs(pend, cfg, 1), cfg.replace(reward=RewardConfig(blend={'regret': 0.5, 'learning_progress': 0.5})), 1)
    assert [r.plays for r in out.rows] == [24, 24] and [r.iterations for r in out.rows] == [2, 2]
    assert pend[0].reward == pytest.approx(1.0) and pend[1].masked and out.masked == 1, out.rows  # regret 1, progress +1; progress -1
    first = reward_stage(mem, [PendingDesign(1, None, {**sample, 'episode_id': 'd1'}, iteration=0)], cfg, 0).rows[0]
    assert first.plays == 16 and first.reward != pend[0].reward
    seen = []
    class Recorder:
        def train_step(self, samples): seen.extend(samples); return {'loss_agent': 0.0, 'loss_designer': 0.0}
    update_stage(Recorder(), type('P', (), {'adapter_version': None})(), PlayOutcome(RolloutResult([], {}, {}), 0), None, pend, cfg, 1)
    assert [s.episode_id for s in seen] == ['d1'] and seen[0].reward == pytest.approx(1.0)  # the masked design is not trained
