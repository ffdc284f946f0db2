"""Randomness an environment draws from outside `self.np_random` is made a function of the seed and the actions in every
worker (`spade_nb.worker._fix_entropy`/`_reseed`), through the real sandbox: two workers, interleaved instances, and
admission, which used to admit such an environment now and then and see it disagree with its replays in play."""
import pytest

from spade_nb.admission import admit
from spade_nb.sandbox import SandboxedEnv
from spade_nb.seeds import seed_sources

NP_LINE = "self.code = ''.join(str(int(d)) for d in self.np_random.integers(1, 7, size=4))"
SOURCES = {  # CodeBreaker with its code drawn from each ambient source instead of self.np_random
    'random': "import random; self.code = ''.join(random.choice('123456') for _ in range(4))",
    'Random()': "import random; r = random.Random(); self.code = ''.join(r.choice('123456') for _ in range(4))",
    'secrets': "import secrets; self.code = ''.join(secrets.choice('123456') for _ in range(4))",
    'uuid4': "import uuid; self.code = ''.join('123456'[b % 6] for b in uuid.uuid4().bytes[:4])",
    'numpy global': "self.code = ''.join(str(int(d)) for d in np.random.randint(1, 7, size=4))",
    'numpy default_rng()': "self.code = ''.join(str(int(d)) for d in np.random.default_rng().integers(1, 7, size=4))",
}


def _variant(line: str) -> str:
    code = seed_sources()['CodeBreakerEnv']
    assert NP_LINE in code
    return code.replace(NP_LINE, line)


def _episode(env, seed, instance, actions):
    rows = [env.reset(seed=seed, instance=instance)[0]]
    return rows + [env.step(a, instance=instance)[:2] for a in actions]


@pytest.mark.parametrize('source', list(SOURCES))
def test_ambient_randomness_is_a_function_of_the_seed(source):
    code, probes = _variant(SOURCES[source]), ['1234', '5612', '3456']
    with SandboxedEnv(code) as a, SandboxedEnv(code) as b:
        sols = set()
        for s in (7, 8, 9):
            a.reset(seed=s); sols.add(tuple(a.solution()))
        assert len(sols) > 1  # the seed still matters
        one = [_episode(a, s, 'x', probes) for s in (7, 8)]
        two = [_episode(b, s, 'y', probes) for s in (7, 8)]  # another worker, another instance name
        assert one == two
        b.reset(seed=7, instance='p'); b.reset(seed=7, instance='q')  # interleaved instances of one worker
        assert [b.step(a, instance=i)[0] for a in probes for i in ('p', 'q')] == [r[0] for r in one[0][1:] for _ in (0, 1)]


def test_admission_admits_what_is_now_deterministic_and_still_rejects_what_is_not():
    greeting = _variant(NP_LINE).replace("return ('I hid", "import random; return (random.choice(['Hello! ', 'Hi! ']) + 'I hid")
    verdicts = [admit(greeting) for _ in range(8)]  # one of two greetings: used to pass ~1 time in 100, now always the same
    assert all(v.ok for v in verdicts), [v.details for v in verdicts if not v.ok]
    raw = _variant(NP_LINE).replace("return ('I hid", "return (open('/dev/urandom', 'rb').read(4).hex() + ' I hid")
    v = admit(raw)  # a file read of /dev/urandom is outside what the worker routes: the determinism checks catch it
    assert not v.ok and v.reason == 'nondeterministic', (v.reason, v.details)


def test_an_echo_that_carries_the_secret_under_another_greeting_is_not_an_unrelated_action():
    """On these seeds the echo control's first reply holds the digits 4164 (the prompt's '4 digits, each from 1 to 6 ...
    4 digits'), which is the code of one of its own seeds: an honest win. Its other episodes differ from it only by the
    greeting, so they carry the same digits and win there too; they used to be counted as unrelated actions, and the
    design was rejected as a reward that ignores the actions (CI, 1 run in 40)."""
    greeting = _variant(NP_LINE).replace("return ('I hid", "import random; return (random.choice(['Hello! ', 'Hi! ']) + 'I hid")
    v = admit(greeting, seeds=[928121584, 2046121013, 515228920, 616950909])
    assert v.measurements['controls']['echo'] > 0  # the precondition: the echo won an episode
    assert v.ok, (v.reason, v.details)
    assert v.measurements['any_action_win_share'] == 0.0
