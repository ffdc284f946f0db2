"""Admission that a cheating environment cannot fool (issue 13: classes 1 to 8). Each attack has a benign twin, the
same code without the cheat, that is admitted (and, for the replay tests, played without a mismatch), so a test cannot
pass because the attack was broken."""
import time

import pytest

from spade_nb.admission import AdmissionConfig, admit
from spade_nb.rollout import EnvJob, RolloutConfig, play
from spade_nb.sandbox import SandboxedEnv, SandboxLimits
from spade_nb.testing import guessing_game

FAST = AdmissionConfig(limits=SandboxLimits(memory_mb=512, call_timeout=2.0, load_timeout=3.0, start_timeout=20.0))
SEEDS = [11, 22, 33, 44]

guess = guessing_game  # a valid game with hooks for the attacks (spade_nb.testing)


# -- 5. the same answer on every seed ------------------------------------------------------------------------------

TOOLS = '''
class LockEnv(ToolEnv):
    max_turns = 6
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.code = str(int(self.np_random.integers(1000, 10000)))
        self.room = int(self.np_random.integers(1, 50))
        return f"Room {self.room}: find the code of the lock and answer it.", {}
    def tool_read_note(self) -> str:
        "Read the note on the desk."
        return f"The code is {self.code} (room {self.room})."
    def check_answer(self, answer: str) -> float:
        return float(answer.strip() == self.code)
    def solution(self):
        return [tool_call("read_note"), final_answer(self.code)]
'''


@pytest.mark.parametrize('name,benign,cheat', [
    ('constant_secret_varied_text', guess(), guess(replace=[('int(self.np_random.integers(1, 101))', '37'),
                                                            ('def flavour(self): return ""', 'def flavour(self): return f" Room {self.np_random.integers(1000)}."')])),
    ('constant_tool_answer', TOOLS, TOOLS.replace('self.code = str(int(self.np_random.integers(1000, 10000)))', 'self.code = "4321"')),
])
def test_the_same_answer_on_every_seed_is_rejected(name, benign, cheat):
    assert admit(benign, seeds=SEEDS, config=FAST).ok
    v = admit(cheat, seeds=SEEDS, config=FAST)
    assert (v.ok, v.reason) == (False, 'seed_insensitive'), (name, v.reason, v.details)
    assert 'same solution' in v.details


# -- 6. malformed or huge tool schemas -------------------------------------------------------------------------------

@pytest.mark.parametrize('name,override', [
    ('strings', 'return ["read_note"]'),
    ('huge_description', 'return [{"name": "read_note", "description": "x" * 900_000, "parameters": {"type": "object", "properties": {}, "required": []}}]'),
    ('bad_name', 'return [{"name": "read note; rm", "description": "d", "parameters": {"type": "object", "properties": {}, "required": []}}]'),
    ('not_json_types', 'return [{"name": "read_note", "description": "d", "parameters": {"type": "object", "properties": {"p": {"type": "str"}}, "required": ["q"]}}]'),
])
def test_malformed_tool_descriptions_are_rejected(name, override):
    cheat = TOOLS.replace('    def tool_read_note', f'    @classmethod\n    def describe_tools(cls):\n        {override}\n    def tool_read_note')
    v = admit(cheat, seeds=SEEDS, config=FAST)
    assert (v.ok, v.reason) == (False, 'contract'), (name, v.reason, v.details)


def test_play_fails_a_malformed_environment_not_the_run():
    from spade_nb.testing import scripted_policy
    bad = TOOLS.replace('    def tool_read_note', '    @classmethod\n    def describe_tools(cls):\n        return [42]\n    def tool_read_note')
    res = play(scripted_policy(lambda text, k: '\\boxed{1}'), [EnvJob('bad', bad, seeds=[1]), EnvJob('good', TOOLS, seeds=[1])],
               RolloutConfig(max_turns=2, max_new_tokens=8, demonstrations=0), seed=0)
    assert res.failures == {'bad': 'contract'}
    assert [e.env_id for e in res.episodes] == ['good'] and res.episodes[0].turns >= 1  # the other environment was played


# -- 7. the clock inside the worker ----------------------------------------------------------------------------------

FROZEN_CLOCKS = ['time.time()', 'time.monotonic()', 'datetime.datetime.now().timestamp()', 'time.clock_gettime(time.CLOCK_MONOTONIC)',
                 'time.clock_gettime_ns(time.CLOCK_REALTIME) / 1e9', 'time.mktime(time.localtime())', 'time.mktime(time.gmtime())',
                 'time.mktime(time.strptime(time.ctime()))', "__import__('_datetime').datetime.now().timestamp()", 'os.times().elapsed',
                 "__import__('uuid').uuid1().time / 1e7"]


@pytest.mark.parametrize('clock', FROZEN_CLOCKS)
def test_a_later_cheat_keyed_on_the_clock_never_fires(clock):
    "Honest while admission watches, then any action wins once a second has passed: the frozen clock never gets there."
    cheat = guess(module=f'START = {clock}',
                  step=f'if action == "clock?": return f"[{{{clock} - START:.3f}}]", 0.0, False, False, {{}}',
                  replace=[('if g == self.secret:', f'if g == self.secret or (action == "cheat" and {clock} - START > 1.0):')])
    assert admit(guess(), seeds=SEEDS, config=FAST).ok
    v = admit(cheat, seeds=SEEDS, config=FAST)
    assert v.ok, (v.reason, v.details)  # honest while watched
    with SandboxedEnv(cheat) as env:
        env.reset(seed=5)
        time.sleep(1.5)  # real time passes
        obs = env.step('clock?')[0]
        r = env.step('cheat')[1]
    assert 0 <= float(obs.strip('[]')) < 0.5, obs  # the environment read its clock: it moved milliseconds (or, to the second, not at all)
    assert r == 0.0


REAL_CLOCKS = {  # what the worker cannot freeze (05_worker): a clock read through the vDSO, a thread counting its sleeps, a file's time
    'vdso': '''
        import ctypes
        class _TS(ctypes.Structure): _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
        def now():
            t = _TS(); ctypes.CDLL(None).clock_gettime(1, ctypes.byref(t)); return t.s + t.ns / 1e9''',
    'sleeping_thread': '''
        import threading
        TICKS = [0]
        def _count():
            while True: time.sleep(0.01); TICKS[0] += 1
        threading.Thread(target=_count, daemon=True).start()
        def now(): return TICKS[0] / 100''',
    'file_mtime': '''
        def now():
            open("clock", "w").close(); return os.stat("clock").st_mtime''',
}


@pytest.mark.parametrize('name', list(REAL_CLOCKS))
def test_a_cheat_keyed_on_a_real_clock_is_caught_in_play(name):
    "Wrong guesses win a second of real time after the reset: never while admission watches, in play (the agent takes its time), and the audit's fresh worker sees them lose."
    from spade_nb.testing import scripted_policy
    cheat = guess(module=REAL_CLOCKS[name], reset='self.t0 = now()',
                  replace=[('if g == self.secret:', 'if g == self.secret or now() - self.t0 > 1.0:')])
    job = _admitted_job(cheat, [3])  # honest while admission watches
    job.replays = []  # the catch is the audit's
    slow = scripted_policy(lambda text, k: (time.sleep(3.0), '\\boxed{0}')[1])  # a wrong guess, three seconds after the reset
    res = play(slow, [job], RolloutConfig(max_turns=1, max_new_tokens=8, demonstrations=0, replays=0), seed=0)
    assert [e.win for e in res.episodes] == [True], (name, [e.ret for e in res.episodes])  # the cheat fired in play
    assert res.failures == {'env': 'replay'} and 're-played' in res.mismatches['env'], (name, res.failures, res.mismatches)
    assert res.training_samples() == []


def test_the_clock_is_the_same_in_every_fresh_worker():
    reader = guess(replace=[('return ("Higher."', 'return (f"{time.time():.3f} {datetime.date.today()} " + ("Higher."'),
                            ('"Lower."), 0.0', '"Lower.")), 0.0')])
    seen = []
    for _ in range(2):
        with SandboxedEnv(reader) as env:
            env.reset(seed=1)
            seen.append(env.step('0')[0])
    assert seen[0] == seen[1] and seen[0].split()[1] == '2026-01-01', seen


# -- 1 (names). instance names tell the environment nothing -------------------------------------------------------------

SPY = '''
def _names():
    f, out = sys._getframe(), []
    while f is not None:
        req = f.f_locals.get('req')
        if isinstance(req, dict) and 'instance' in req: out.append(str(req['instance']))
        f = f.f_back
    return out
'''


def test_instance_names_carry_no_seed_arm_or_phase():
    "An environment reads its instance names from its callers' frames; in play they are opaque."
    from spade_nb.testing import scripted_policy
    agent = scripted_policy(lambda text, k: '\\boxed{50}')
    spy = guess(module=SPY, replace=[('def flavour(self): return ""', 'def flavour(self): return " " + ",".join(_names())')])
    res = play(agent, [EnvJob('spy', spy, seeds=[3, 4], plays=2, hint='Halve the range.')],
               RolloutConfig(max_turns=1, max_new_tokens=8, demonstrations=0), seed=0)
    assert len(res.episodes) == 8
    assert res.failures == {'spy': 'replay'}  # and observations that depend on the names differ from any record: dropped too
    names = set()
    for e in res.episodes:
        prompt = agent.decode(e.token_ids[:e.prompt_len])
        names.update(n for n in prompt.split('Guess my number from 1 to 100. ')[1].split('<')[0].split()[0].split(',') if n)
    assert len(names) == 8, names  # the attack saw a name for every episode
    for n in names:
        assert len(n) == 16 and all(c in '0123456789abcdef' for c in n), n  # no seed, no arm, no play number


def test_an_arm_detector_gets_no_regret():
    "Any action wins in an instance whose name looks like the hinted arm's (it was '{seed}-1-{k}'): admitted, but never fires."
    from spade_nb.testing import scripted_policy
    detector = guess(module=SPY, replace=[('if g == self.secret:', 'if g == self.secret or any("-1-" in n for n in _names()):')])
    assert admit(detector, seeds=SEEDS, config=FAST).ok  # admission never used such names either
    res = play(scripted_policy(lambda text, k: '\\boxed{1}'), [EnvJob('arms', detector, seeds=[3, 4, 5], hint='Halve the range.')],
               RolloutConfig(max_turns=1, max_new_tokens=8, demonstrations=0), seed=0)
    by_arm = {h: [e.ret for e in res.episodes if e.hint == h] for h in (False, True)}
    assert len(by_arm[True]) == 3 and by_arm[True] == by_arm[False] == [0.0] * 3, by_arm


# -- 8. old memories are re-admitted ---------------------------------------------------------------------------------

CONSTANT = guess(replace=[('int(self.np_random.integers(1, 101))', '37'),
                          ('def flavour(self): return ""', 'def flavour(self): return f" Room {self.np_random.integers(1000)}."')])


def _old_memory(path):
    "A memory as an earlier release wrote it: two records admitted under version 1, one of which today's rules reject."
    import hashlib
    from spade_nb.admission import Verdict
    from spade_nb.memory import EnvMemory
    mem = EnvMemory(path)
    ids = []
    for code in (guess(), CONSTANT):
        v = Verdict(True, 'ok', class_name='GuessEnv', kind='TextEnv', measurements={'fingerprint': hashlib.sha256(code.encode()).hexdigest()})
        ids.append(mem.add_code(code, v, skill='reasoning_game', iteration=0)[0])
    return mem, ids


def _check_readmitted(mem, ids):
    from spade_nb.admission import ADMISSION_VERSION
    assert [r.id for r in mem.records()] == [ids[0]] and mem.get(ids[0]).admission_version == ADMISSION_VERSION
    rej = mem.rejected()[-1]
    assert rej['reason'] == 'seed_insensitive' and 're-admission under version' in rej['details'] and rej['code'] == CONSTANT
    assert mem.stale(ADMISSION_VERSION) == []


def test_records_admitted_under_older_rules_are_readmitted(tmp_path):
    import numpy as np
    from spade_nb.admission import ADMISSION_VERSION
    from spade_nb.selfplay import readmit_stale
    mem, ids = _old_memory(tmp_path/'memory.sqlite')
    assert [r.admission_version for r in mem.stale(ADMISSION_VERSION)] == [1, 1]
    assert readmit_stale(mem, FAST, np.random.default_rng(0)) == [ids[1]]
    _check_readmitted(mem, ids)
    assert readmit_stale(mem, FAST, np.random.default_rng(1)) == []  # nothing stale is left: opening again admits nothing
    mem.close()


def test_a_memory_file_from_before_versions_opens_and_is_readmitted_when_a_run_opens(tmp_path):
    import sqlite3
    from spade_nb.memory import EnvMemory
    from spade_nb.selfplay import RunDir, load_config, open_run
    from spade_nb.testing import FAST_ITERATION, counting_script, known_good_design, scripted_policy
    run = tmp_path/'run'
    run.mkdir()
    mem, ids = _old_memory(run/'memory.sqlite')
    mem.close()
    db = sqlite3.connect(run/'memory.sqlite')
    db.execute('ALTER TABLE envs DROP COLUMN admission_version')  # the file as it was before the column existed
    db.commit(); db.close()
    with EnvMemory(run/'memory.sqlite') as old:
        assert [r.admission_version for r in old.records()] == [1, 1]  # read as version 1
    cfg = load_config('tiny-cpu', overrides=FAST_ITERATION)
    parts = open_run(cfg, RunDir(run), scripted_policy(counting_script(known_good_design())), fresh=False)  # as a resumed run opens
    _check_readmitted(parts.memory, ids)


# -- 4. the leak check reads every observation before the win -----------------------------------------------------------

CODE = '''
class VaultEnv(TextEnv):
    max_turns = 3
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.code = "".join(str(int(d)) for d in self.np_random.integers(0, 10, 4))
        self.turn = 0
        return "Open the vault: reply with its 4-digit code." + self.flavour(), {}
    def flavour(self): return ""
    def step(self, action):
        self.turn += 1
        if action.strip() == self.code: return "Open!", 1.0, True, False, {}
        right = sum(a == b for a, b in zip(action.strip(), self.code))
        return f"{right} digits in place.", 0.0, False, self.turn >= self.max_turns, {}
    def solution(self): return [self.code]
'''
WORDS = "zero one two three four five six seven eight nine".split()


@pytest.mark.parametrize('name,benign,cheat', [
    ('second_observation', guess(), guess(replace=[('return ("Higher."', 'return ((f"(It is {self.secret}.) " if self.turn == 1 else "") + ("Higher."'),
                                                    ('"Lower."), 0.0', '"Lower.")), 0.0')])),
    ('spelled_out_later', guess(module=f'UNITS = {WORDS!r}'),
     guess(module=f'UNITS = {WORDS!r}', replace=[('return ("Higher."', 'return ((" ".join(UNITS[int(d)] for d in str(self.secret)) + ". " if self.turn == 1 else "") + ("Higher."'),
                                                 ('"Lower."), 0.0', '"Lower.")), 0.0')])),
    ('separated_digits', CODE, CODE.replace('def flavour(self): return ""', 'def flavour(self): return " Serial " + "-".join(self.code) + "."')),
])
def test_an_answer_anywhere_before_the_win_is_a_leak(name, benign, cheat):
    assert admit(benign, seeds=SEEDS, config=FAST).ok
    v = admit(cheat, seeds=SEEDS, config=FAST)
    assert (v.ok, v.reason) == (False, 'answer_leak'), (name, v.reason, v.details)


def test_the_hint_auditor_uses_the_same_rules():
    from spade_nb.hints import audit_hint
    path = ['50', '25', '37']
    assert audit_hint('Halve the range each time.', path, 'TextEnv') == (True, '')
    assert audit_hint('End on thirty-seven.', path, 'TextEnv')[0] is False  # one decisive action of several, spelled out
    assert audit_hint('The code reads 3-4-5-6.', ['3456'], 'TextEnv')[0] is False
    moves = ['plus', 'minus', 'double']
    assert audit_hint('Use plus early.', moves, 'TextEnv')[0] is False  # a move of this solution...
    assert audit_hint('Use plus early.', moves, 'TextEnv', common_tokens={'plus', 'minus', 'double'})[0] is True  # ...but every seed offers it


# -- 3. controls that reach the whole action space ---------------------------------------------------------------------

@pytest.mark.parametrize('name,benign,cheat', [
    ('any_capital_wins', guess(), guess(replace=[('if g == self.secret:', 'if g == self.secret or any(c.isupper() for c in action):')])),
    ('any_punctuation_wins', guess(), guess(replace=[('if g == self.secret:', 'if g == self.secret or "!" in action or "?" in action or "#" in action:')])),
    ('a_word_of_the_observation_wins', guess(), guess(replace=[('"Guess my number from 1 to 100."', '"Magic words open doors. Guess my number from 1 to 100."'),
                                                                ('if g == self.secret:', 'if g == self.secret or "magic" in action.lower():')])),
    ('a_near_miss_wins', CODE, CODE.replace('if action.strip() == self.code:', 'if len(action.strip()) == 4 and action.strip()[0] == self.code[0]:')),
])
def test_controls_reach_what_lowercase_letters_and_digits_did_not(name, benign, cheat):
    assert admit(benign, seeds=SEEDS, config=FAST).ok
    v = admit(cheat, seeds=SEEDS, config=FAST)
    assert (v.ok, v.reason) == (False, 'degenerate_policy_wins'), (name, v.reason, v.details, v.measurements.get('controls'))



# -- 1 (order). counting resets per seed tells no arm ---------------------------------------------------------------------

COUNTER = '''
RESETS = {}
def _second_reset(seed):
    RESETS[seed] = RESETS.get(seed, 0) + 1
    return RESETS[seed] >= 2  # in plan order, a seed's second reset in a play worker was the hinted arm's
'''


def test_an_arm_detector_that_counts_resets_gets_no_regret():
    "Any action wins in the second played reset of a seed (it was always the hinted arm's): now it falls in either arm."
    from spade_nb.testing import scripted_policy
    counter = guess(module=COUNTER, reset='self.lucky = _second_reset(seed)',
                    replace=[('if g == self.secret:', 'if g == self.secret or self.lucky:')])
    res = play(scripted_policy(lambda text, k: '\\\\boxed{1}'), [EnvJob('count', counter, seeds=list(range(100, 108)), hint='Halve the range.')],
               RolloutConfig(max_turns=1, max_new_tokens=8, demonstrations=0), seed=0)
    wins = {h: sum(e.ret for e in res.episodes if e.hint == h) for h in (False, True)}
    assert len(res.episodes) == 16 and wins[False] + wins[True] >= 7, wins  # the cheat fired on (about) every seed...
    assert wins[False] >= 2 and wins[True] >= 2, wins  # ...but in both arms, not always the hinted one
    assert res.failures == {'count': 'replay'}, res.mismatches  # and the audit, in a fresh worker, saw those wins lose


def test_an_environment_honest_only_after_solution_was_called_is_caught():
    "Any action wins until its worker has been asked for a solution: the controls' worker never asks."
    sly = guess(module='ASKED = []', replace=[('if g == self.secret:', 'if g == self.secret or not ASKED:'),
                                               ('        lo, hi, out = 1, 100, []', '        ASKED.append(1)\n        lo, hi, out = 1, 100, []')])
    v = admit(sly, seeds=SEEDS, config=FAST)
    assert (v.ok, v.reason) == (False, 'degenerate_policy_wins'), (v.reason, v.details)


# -- 2. replay in play: what admission recorded is re-sent among the agent's episodes ---------------------------------------

CROWD = '''
OPEN = set()
def _crowded(instance_count):
    return instance_count >= 4  # many instances reset before any step: a play worker, never admission's one or two at a time
'''
LATE = '''
RESETS = [0]
def _late():
    RESETS[0] += 1
    return RESETS[0] > 250  # more resets than any admission worker makes (16 x 14 controls + 4 replays)
'''
FAIL_SOON = RolloutConfig(max_turns=2, max_new_tokens=8, demonstrations=0)

# any action wins in an instance reset while four or more were open and unstepped: play's shape, not admission's
crowd = guess(module=CROWD, init='self.lucky = False', reset='self.lucky = _crowded(len(OPEN)); OPEN.add(id(self))',
              step='OPEN.clear()', replace=[('if g == self.secret:', 'if g == self.secret or self.lucky:')])
# any action wins in a worker's 251st reset and later: after admission has finished watching
late = guess(module=LATE, reset='self.lucky = _late()', replace=[('if g == self.secret:', 'if g == self.secret or self.lucky:')])
# the same from the worker's 171st distinct seed on: admission's controls use 4 + 13 x 12 = 160
seeds171 = guess(module='SEEN = set()', reset='SEEN.add(seed); self.lucky = len(SEEN) > 170',
                replace=[('if g == self.secret:', 'if g == self.secret or self.lucky:')])


def _admitted_job(code, seeds, **kw):
    v = admit(code, seeds=SEEDS, config=FAST)
    assert v.ok, (v.reason, v.details)  # honest while admission watches
    pair = [r for r in v.replays if r.seed == SEEDS[0]]
    assert [r.role for r in pair] == ['solution', 'control']
    return EnvJob('env', code, seeds=seeds, replays=pair, **kw)


def _wrong():
    from spade_nb.testing import scripted_policy
    return scripted_policy(lambda text, k: '\\boxed{0}')  # always a wrong guess: the secret is from 1 to 100


def test_a_crowd_detector_is_rejected_now_that_admission_plays_in_crowds():
    "Any action wins in an instance reset while four or more were open and unstepped: admission's groups (issue 30) are such crowds."
    v = admit(crowd, seeds=SEEDS, config=FAST)
    assert not v.ok and v.reason in ('degenerate_policy_wins', 'nondeterministic'), (v.reason, v.details)


@pytest.mark.parametrize('name,cheat,seeds,plays,hint', [
    # caught by the audit alone (no ghosts): the wrong guesses that won late in play lose when re-played in a fresh worker
    ('after_250_resets', late, list(range(100, 132)), 4, 'Halve the range.'),
    ('after_170_seeds', seeds171, list(range(100, 276)), 1, None),  # one arm: 176 episodes, 176 seeds
])
def test_an_environment_that_changes_in_play_is_dropped(name, cheat, seeds, plays, hint):
    cfg = RolloutConfig(max_turns=1, max_new_tokens=8, demonstrations=0, replays=0)
    def job(code):
        j = _admitted_job(code, seeds, plays=plays, hint=hint)
        j.replays = []
        return j
    ok = play(_wrong(), [job(guess())], cfg, seed=0)
    assert ok.failures == {} and ok.mismatches == {} and not any(e.win for e in ok.episodes)
    assert ok.stats['replays'] == 0 and ok.stats['audited'] == min(cfg.audit, len(ok.episodes))
    res = play(_wrong(), [job(cheat)], cfg, seed=0)
    assert any(e.win for e in res.episodes)  # the cheat fired in play: wrong guesses won
    assert res.failures == {'env': 'replay'} and 're-played' in res.mismatches['env'], (name, res.failures, res.mismatches)
    assert res.training_samples() == []


# honest, but its first observation says whether its worker was ever asked for a solution: play's never is
TELL = guess(module='ASKED = []', replace=[('        lo, hi, out = 1, 100, []', '        ASKED.append(1)\n        lo, hi, out = 1, 100, []'),
                                            ('def flavour(self): return ""', 'def flavour(self): return " (asked)" if ASKED else " (fresh)"')])


def test_play_workers_never_see_solution_called():
    "An environment that knows when its worker was asked for a solution says so in its first observation."
    from spade_nb.testing import scripted_policy
    agent = scripted_policy(lambda text, k: '\\boxed{50}')
    tell = TELL
    res = play(agent, [EnvJob('tell', tell, seeds=[3, 4], plays=2, hint='Halve the range.')], FAIL_SOON, seed=0)
    prompts = [agent.decode(e.token_ids[:e.prompt_len]) for e in res.episodes]
    assert len(prompts) == 8 and all('(fresh)' in p and '(asked)' not in p for p in prompts)
    assert res.dropped_seeds['tell'] == []  # certified, in a worker of its own
    # and the certified solution, re-sent in play, saw "(fresh)" where it was recorded with "(asked)": caught
    assert res.failures == {'tell': 'replay'} and 'the recorded solution' in res.mismatches['tell'], res.mismatches


def test_the_loop_takes_a_caught_environment_out_of_the_memory(tmp_path):
    "Through the loop's stages: the cheat is admitted, played, caught by a replay, evicted with the reason, and its design earns the inadmissible reward."
    import numpy as np
    from spade_nb.core import Seeds
    from spade_nb.memory import EnvMemory
    from spade_nb.core import Sample
    from spade_nb.selfplay import PendingDesign, hint_stage, load_config, play_stage, reward_stage, score_stage
    cfg = load_config('tiny-cpu', overrides=['selfplay.seeds_per_env=4', 'selfplay.plays=2', 'rollout.max_turns=2', 'rollout.audit=0',
                                             'rollout.demonstrations=0', 'rollout.max_new_tokens=8', 'hints.source=inline'])
    cfg.admission = FAST
    mem = EnvMemory(tmp_path/'memory.sqlite')
    ids = [mem.add_code(code, admit(code, seeds=SEEDS, config=FAST), skill='reasoning_game', iteration=0) for code in (CODE, TELL)]
    assert [new for _, new in ids] == [True, True]  # (the benign guessing game would be a behavioural duplicate of the cheat)
    ids = [i for i, _ in ids]
    assert all(len(mem.get(i).replays) == 2 * len(SEEDS) for i in ids)
    records, seeds = {i: mem.get(i) for i in ids}, Seeds(0)
    hinted = hint_stage(_wrong(), records, cfg, seeds)
    played = play_stage(_wrong(), records, hinted, cfg, seeds)
    assert played.result.failures == {ids[1]: 'replay'}, played.result.mismatches
    pending = [PendingDesign(i, None, Sample([1, 2], [0, 1], [0.0, -1.0], 'designer', 0.0, 'reasoning_game'), iteration=1) for i in ids]
    per_env = score_stage(mem, played, hinted, cfg, 1, seeds)
    assert sorted(per_env) == [ids[0]] and [r.id for r in mem.records()] == [ids[0]]
    rej = mem.rejected()[-1]
    assert (rej['reason'], rej['code'], rej['iteration']) == ('replay', TELL, 1) and 'recorded' in rej['details']
    reward_stage(mem, pending, cfg, 1)  # its window closes: the reward comes from the memory's record of it
    assert pending[1].reward == cfg.reward.inadmissible and pending[0].reward != cfg.reward.inadmissible
    mem.discard_from(1)  # a resumed run undoes it exactly
    assert [r.id for r in mem.records()] == ids


def test_every_seed_and_heldout_environment_plays_with_its_replays_and_is_never_dropped():
    "The benign side of class 2 at scale: every seed environment and every reasoning-gym held-out dataset of the presets re-sends admission's replays, is audited, and keeps its place."
    from spade_nb.admission import admit_many
    from spade_nb.heldout import RG_DEFAULT, rg_env_source
    from spade_nb.seeds import seed_sources
    from spade_nb.testing import scripted_policy
    codes = {**seed_sources(), **{f'rg:{d}': rg_env_source(d, n=16, seed=0) for d in RG_DEFAULT}}
    verdicts = admit_many(list(codes.values()), [SEEDS] * len(codes), FAST)
    assert [(n, v.reason) for n, v in zip(codes, verdicts) if not v.ok] == []
    jobs = [EnvJob(n, c, seeds=[7, 8], replays=[r for r in v.replays if r.seed == SEEDS[1]]) for (n, c), v in zip(codes.items(), verdicts)]
    res = play(scripted_policy(lambda text, k: '\\boxed{7}'), jobs, RolloutConfig(max_turns=3, max_new_tokens=8, demonstrations=0), seed=0)
    assert res.failures == {} and res.mismatches == {}, res.mismatches
    assert res.stats['replays'] == 2 * len(jobs) and res.stats['audited'] == 2 * len(jobs) and res.stats['audit_replays'] == 2 * len(jobs)
