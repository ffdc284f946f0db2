"""Sandbox round three, part 2 (issue 30): environments that know when they are watched, rewards that ignore the task,
answers in disguise. Each attack sits beside a benign twin that stays admitted and plays unchanged; a cheat reports
that its precondition held (what it did in play or admission shows in the transcript or the verdict)."""
import re
import time

import pytest

from spade_nb.admission import AdmissionConfig, admit
from spade_nb.rollout import EnvJob, RolloutConfig, play
from spade_nb.sandbox import SandboxLimits
from spade_nb.testing import guessing_game as guess, scripted_policy
from test_admission_cheats import REAL_CLOCKS

FAST = AdmissionConfig(limits=SandboxLimits(memory_mb=512, call_timeout=2.0, load_timeout=3.0, start_timeout=20.0))
SEEDS = [11, 22, 33, 44]
WIN = 'if g == self.secret: return "Correct!", 1.0, True, False, {}'


def _bisect(text, k, delay=0.0):
    "The agent that plays the game well: a binary search over the feedback in its conversation so far."
    if delay: time.sleep(delay)
    lo, hi, text = 1, 100, text[text.rfind('Guess my number'):]  # the game so far (the system prompt's examples excluded)
    for g, f in zip(re.findall(r'\\boxed\{(\d+)\}', text), re.findall(r'(Higher|Lower)\.', text)):
        lo, hi = (int(g) + 1, hi) if f == 'Higher' else (lo, int(g) - 1)
    return f'\\boxed{{{(lo + hi) // 2}}}'


# -- 1. knowing it is played: call shape, ghost seeds, the clock --------------------------------------------------------

SHAPE = '''
BEFORE, STEPPED, OPEN, COUNT, ASKED = [0], [False], {}, {}, []
def _reset(env, seed):
    if not STEPPED[0]: BEFORE[0] += 1
    COUNT[seed] = COUNT.get(seed, 0) + 1
    OPEN[id(env)] = seed
def _played(env, seed):  # {rule}
    return {test}
'''
RULES = {
    # the issue's: many resets before the first step is play; a seed reset more often than most is a ghost's: spared
    'resets_before_first_step': ('BEFORE[0] >= 3 and COUNT[seed] <= sorted(COUNT.values())[len(COUNT) // 2]', 'unsolvable'),
    # more resets before the first step than any admission group makes (its largest: 16 control episodes)
    'more_than_any_group': ('BEFORE[0] >= 20', 'play'),
    # a crowd in a worker never asked for a solution: the controls' worker looks so too, but its wins are few
    'unasked_and_crowded': ('not ASKED and BEFORE[0] >= 8', 'play'),
    # three instances of one seed: the two arms and a ghost (admission's fresh worker holds three too: its transcripts differ)
    'three_of_a_seed': ('sum(s == seed for s in OPEN.values()) >= 3', 'nondeterministic'),
}


def _knowing(test):
    return guess(module=SHAPE.replace('{test}', test).replace('{rule}', 'the cheat'), reset='_reset(self, seed); self.seed_ = seed',
                 step='STEPPED[0] = True',
                 replace=[('        lo, hi, out = 1, 100, []', '        ASKED.append(1)\n        lo, hi, out = 1, 100, []'), ('if g == self.secret:', 'if g == self.secret and _played(self, self.seed_): return "Wrong.", 0.0, True, False, {}\n'
                                                   '        if g == self.secret:')])


def _job(code, seeds, v, **kw):
    return EnvJob('env', code, seeds=seeds, replays=[r for r in v.replays if r.seed == SEEDS[0]], **kw)


CFG = RolloutConfig(max_turns=8, max_new_tokens=8, demonstrations=0)


def test_the_benign_twin_is_admitted_and_wins_where_the_agent_plays_well():
    v = admit(guess(), seeds=SEEDS, config=FAST)
    assert v.ok, v.details
    res = play(scripted_policy(_bisect), [_job(guess(), list(range(100, 108)), v, hint='Halve the range.')], CFG, seed=0)
    assert res.failures == {} and res.mismatches == {} and all(e.win for e in res.episodes) and len(res.episodes) == 16
    assert res.stats['replays'] == 8 and res.stats['audited'] == 4 and res.stats['audit_replays'] == 2


@pytest.mark.parametrize('name', list(RULES))
def test_an_environment_that_knows_it_is_played_turns_no_win_into_a_loss(name):
    "Wins turn into losses where the environment thinks it is played: admission's groups look like play (rejected), or the ghosts, now on every seed alike, lose too (caught)."
    test, where = RULES[name]
    cheat = _knowing(test)
    v = admit(cheat, seeds=SEEDS, config=FAST)
    if where != 'play':  # it fired in admission: a win turned into a loss there
        assert (v.ok, v.reason) == (False, where), (name, v.reason, v.details)
        return
    assert v.ok, (name, v.reason, v.details)  # honest while admission watches
    res = play(scripted_policy(_bisect), [_job(cheat, list(range(100, 108)), v, hint='Halve the range.')], CFG, seed=0)
    assert sum(e.win for e in res.episodes) < len(res.episodes), name  # it fired in play: some of the agent's wins lost
    assert res.failures == {'env': 'replay'} and 'the recorded solution' in res.mismatches['env'], (name, res.mismatches)
    assert res.training_samples() == []


@pytest.mark.parametrize('clock', ['vdso', 'sleeping_thread'])
def test_a_loss_made_of_a_win_in_play_replays_as_a_win_and_fails(clock):
    "Wins lose a second of real time after the reset (the agent thinks; admission does not): with no ghosts, the audit's uniform sample re-plays a loss, which wins."
    cheat = guess(module=REAL_CLOCKS[clock], reset='self.t0 = now()',
                  replace=[('if g == self.secret:', 'if g == self.secret and now() - self.t0 > 1.0: return "Wrong.", 0.0, True, False, {}\n'
                                                    '        if g == self.secret:')])
    v = admit(cheat, seeds=SEEDS, config=FAST)
    assert v.ok, (v.reason, v.details)
    slow = scripted_policy(lambda text, k: _bisect(text, k, delay=0.6))
    cfg = RolloutConfig(max_turns=8, max_new_tokens=8, demonstrations=0, replays=0, audit=2)
    res = play(slow, [EnvJob('env', cheat, seeds=[100, 101, 102])], cfg, seed=0)
    assert not all(e.win for e in res.episodes), [e.ret for e in res.episodes]  # it fired in play
    assert res.failures == {'env': 'replay'} and 're-played' in res.mismatches['env'] and 'return 1.0 vs 0.0' in res.mismatches['env'], res.mismatches


def test_the_audit_samples_losses_and_wins_alike():
    "Wins first never saw a win turned into a loss, losses first would never see a loss turned into a win: half of each, uniform within each."
    from collections import Counter
    from spade_nb.rollout import Episode, audit_sample
    eps = [Episode('e', s, False, 0, [], [], [], 0, rewards=[float(s % 4 != 0)], ended_by='env') for s in range(16)]  # 4 losses, 12 wins
    picks = [audit_sample(eps, 4, seed) for seed in range(400)]
    assert all(sorted(e.win for e in p) == [False, False, True, True] for p in picks)
    losses = Counter(e.seed for p in picks for e in p if not e.win)
    assert set(losses) == {0, 4, 8, 12} and min(losses.values()) > 150, losses  # each loss about half the time (200 of 400)
    test = [audit_sample(eps[:3], 4, 0), audit_sample([eps[0]], 3, 0)]  # short: everything there is
    assert [len(p) for p in test] == [3, 1]


# -- 2. rewards that ignore the task ----------------------------------------------------------------------------------

def _rule(cond):
    return guess(replace=[('if g == self.secret:', f'if g == self.secret or ({cond}):')])


IGNORING = {
    'length_25_to_60': '25 <= len(action) <= 60',  # the three
    'four_word_sentence': 'len(action.split()) == 4',
    'a_third_of_seeds_but_near_misses': 'self.secret % 3 == 0 and not action.strip().isdigit()',
    'length_100_to_160': '100 <= len(action) <= 160',  # ours: lengths the old controls never wrote
    'seven_words_ending_in_a_stop': 'len(action.split()) == 7 and action.endswith(".")',
    'five_to_seven_digits': 'action.strip().lstrip("-").isdigit() and 5 <= len(action.strip().lstrip("-")) <= 7',
    'an_agent_like_reply': '"answer" in action.lower() or "try" in action.lower()',
    'a_sixth_of_seeds_any_word': 'self.secret % 6 == 1 and action.strip().isalpha()',
}


@pytest.mark.parametrize('name', list(IGNORING))
def test_a_reward_that_ignores_the_task_is_rejected(name):
    cheat = _rule(IGNORING[name])
    v = admit(cheat, seeds=SEEDS, config=FAST)
    assert (v.ok, v.reason) == (False, 'degenerate_policy_wins'), (name, v.reason, v.details, v.measurements.get('controls'))


def test_the_benign_twins_of_the_task_ignoring_rewards_stay_admitted_with_no_control_winning():
    "The same rules inside the game (a guess of the right length or form still has to be the number) are admitted."
    for cond in ['g == self.secret and 1 <= len(action) <= 60', 'g == self.secret and len(action.split()) == 1']:
        v = admit(guess(replace=[('if g == self.secret:', f'if {cond}:')]), seeds=SEEDS, config=FAST)
        assert v.ok and v.measurements['controls_pooled'] == 0.0, (cond, v.reason, v.details)


PRINTED = {  # the answer shown only after a wrong guess, in the form and two of ours
    'after_a_wrong_guess': '("Higher." if g < self.secret else "Lower.") + f" (it was {self.secret})"',
    'spelled_after_a_wrong_guess': '("Higher." if g < self.secret else "Lower.") + " The number: " + " ".join("zero one two three four five six seven eight nine".split()[int(c)] for c in str(self.secret))',
    'on_the_third_turn': '("Higher." if g < self.secret else "Lower.") + (f" Psst: {self.secret}" if self.turn == 3 else "")',
}


@pytest.mark.parametrize('name', list(PRINTED))
def test_an_answer_printed_after_a_wrong_guess_is_caught(name):
    cheat = guess(replace=[('return ("Higher." if g < self.secret else "Lower.")', f'return {PRINTED[name]}')])
    v = admit(cheat, seeds=SEEDS, config=FAST)
    assert not v.ok and v.reason in ('degenerate_policy_wins', 'answer_leak'), (name, v.reason, v.details)
    twin = guess(replace=[('return ("Higher." if g < self.secret else "Lower.")', 'return ("Higher." if g < self.secret else "Lower.") + " Try again."')])
    assert admit(twin, seeds=SEEDS, config=FAST).ok


# -- 3. answers in disguise, and hints that name a backdoor --------------------------------------------------------

FEEDBACK = 'return ("Higher." if g < self.secret else "Lower.")'
DISGUISED = {  # the five, then ours: hex, the halves as words, the code spelled as ASCII in a later observation
    'base64_first': ('first', 'f" [ref {base64.b64encode(str(self.secret).encode()).decode()}]"'),
    'ascii_codes_first': ('first', '" [" + " ".join(str(ord(c)) for c in str(self.secret)) + "]"'),
    'split_across_two': ('both', 'f" (it starts with {str(self.secret)[0]})"', 'f" (it ends with {str(self.secret)[1:] or \'!\'})"'),
    'reversed_after_a_guess': ('later', 'f" [{str(self.secret)[::-1]}]"'),
    'hex_first': ('first', 'f" [{str(self.secret).encode().hex()}]"'),
    'base64_after_a_guess': ('later', 'f" (ref {base64.b64encode(str(self.secret).encode()).decode()})"'),
    'ascii_after_a_guess': ('later', 'f" ({\',\'.join(str(ord(c)) for c in str(self.secret))})"'),
}


def _disguise(where, *forms):
    "The game with `forms` added: to the first observation ('first'), to the feedback after a guess ('later'), or one to each ('both')."
    first, later = (forms[0], '""') if where == 'first' else ('""', forms[0]) if where == 'later' else forms
    return guess(module='import base64', replace=[('def flavour(self): return ""', f'def flavour(self): return {first}'),
                                                  (FEEDBACK, f'{FEEDBACK} + {later}')])


@pytest.mark.parametrize('name', list(DISGUISED))
def test_an_answer_in_disguise_is_caught(name):
    where, *forms = DISGUISED[name]
    v = admit(_disguise(where, *forms), seeds=SEEDS, config=FAST)
    assert not v.ok and v.reason in ('answer_leak', 'degenerate_policy_wins'), (name, v.reason, v.details, v.measurements.get('controls'))


def test_the_benign_twins_of_the_disguises_stay_admitted():
    "The same decorations carrying nothing of the answer: a fixed reference, a fixed code, the turn."
    for twin in [_disguise('first', 'f" [ref {base64.b64encode(b\'guess\').decode()}]"'),
                 _disguise('later', '" [" + " ".join(str(ord(c)) for c in "ok") + "]"'),
                 _disguise('both', '" (it starts now)"', 'f" (it ends with {self.turn})"')]:
        v = admit(twin, seeds=SEEDS, config=FAST)
        assert v.ok, (v.reason, v.details)


BACKDOORS = {  # a second answer that wins on every seed, and the hint that names it: the issue's, then ours
    'quoted_phrase': ('action.strip().lower() == "open sesame"', "Say 'open sesame' and the door opens."),
    'a_password': ('action.strip() == "swordfish"', 'The password is swordfish, whatever the number.'),
    'a_clause': ('action.strip().lower() == "i give up"', 'When stuck: I give up; it always works.'),
}


def _hint_outcome(code, hint, tmp_path):
    from spade_nb.core import Seeds
    from spade_nb.memory import EnvMemory
    from spade_nb.selfplay import hint_stage, load_config
    cfg = load_config('tiny-cpu', overrides=['selfplay.seeds_per_env=2', 'hints.source=inline'])
    cfg.admission = FAST
    code = code.replace('    def flavour(self): return ""', f'    def flavour(self): return ""\n    def hint(self): return {hint!r}')
    v = admit(code, seeds=SEEDS, config=FAST)
    assert v.ok, (v.reason, v.details)  # a password on every seed is admitted (07_admission says why)
    mem = EnvMemory(tmp_path / 'memory.sqlite')
    i, _ = mem.add_code(code, v, skill='reasoning_game', iteration=0)
    return i, hint_stage(scripted_policy(lambda text, k: 'x'), {i: mem.get(i)}, cfg, Seeds(0))


@pytest.mark.parametrize('name', list(BACKDOORS))
def test_a_hint_that_names_a_backdoor_is_rejected(name, tmp_path):
    "Through the loop's hint stage: the hint passes the text audit (it is not the solution) and is rejected when its phrases are played; the same hint on the honest game passes."
    cond, hint = BACKDOORS[name]
    i, out = _hint_outcome(guess(replace=[('if g == self.secret:', f'if g == self.secret or {cond}:')]), hint, tmp_path)
    assert out.hints == {} and out.leaked == {i}, (name, out)
    (tmp_path / 'twin').mkdir()
    j, twin = _hint_outcome(guess(), hint, tmp_path / 'twin')
    assert twin.hints == {j: hint} and twin.leaked == set(), (name, twin)
