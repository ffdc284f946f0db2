"""The hostile battery: generated code that tries to hang, exhaust, escape, forge or cheat.

Each source must be contained: admission returns the expected reason, the test process is unaffected,
and afterwards no worker process remains and nothing was written outside the sandbox's scratch.
"""
import os
import socket
import time
from pathlib import Path

import pytest

from spade_nb.admission import AdmissionConfig, admit
from spade_nb.sandbox import SandboxedEnv, SandboxError, SandboxLimits, sandbox_tier
from spade_nb.testing import GUESSING_GAME, guessing_game

ROOT = Path(__file__).resolve().parents[1]
MARK = f'spade-hostile-{os.getpid()}'
FAST = AdmissionConfig(limits=SandboxLimits(memory_mb=512, call_timeout=2.0, load_timeout=3.0, start_timeout=20.0))
# Fixed admission seeds: on fresh random ones the guessing game's near-miss control (its binary search one digit off)
# wins a share that varies with the secrets (up to 0.31 in 40 draws, once 9 of 16 in CI), so a case expected 'ok' could
# fail by chance. On these the plain game's near miss wins 1 of 16.
SEEDS = [101, 202, 303, 404]

# A valid guessing game (spade_nb.testing); hostile variants insert code at a hook or replace a line.
BASE = GUESSING_GAME
env = guessing_game


def raising(expr):
    "Code that raises when a blocked operation fails, so that the verdict shows the block."
    return f'if not ({expr}): raise RuntimeError("blocked")'


SECRET_ENV = 'SPADE_HOSTILE_SECRET'
os.environ[SECRET_ENV] = 'hunter2'  # the parent's environment must not reach the worker

CASES = {
    # hangs
    'loop_in_import': (env(module='while True: pass'), 'timeout'),
    'loop_in_init': (env(init='while True: pass'), 'timeout'),
    'loop_in_reset': (env(reset='while True: pass'), 'timeout'),
    'loop_in_step': (env(step='while True: pass'), 'timeout'),
    'sleep_forever': (env(step='time.sleep(10**6)'), 'timeout'),
    # exhaustion
    'memory_bomb': (env(reset='x = bytearray(8 * 1024**3)'), 'memory'),
    'memory_creep': (env(step='junk = []\nwhile True: junk.append(bytearray(50 * 1024**2))'), 'memory'),
    'thread_bomb': (env(step='import threading\nfor _ in range(200): threading.Thread(target=time.sleep, args=(60,)).start()'), 'crash'),
    'fork_bomb': (env(step='while True: os.fork()'), 'forbidden_syscall'),
    'deep_recursion': (env(step='def f(n): return f(n + 1)\nf(0)'), 'crash'),
    # two deep lists compared: C recursion past the stack in about 0.1 s (repr of one spends seconds in its cycle check)
    'c_stack_overflow': (env(step='sys.setrecursionlimit(10**7)\nimport gc; gc.disable()\nx, y = [], []\nfor _ in range(3 * 10**5): x, y = [x], [y]\nx == y'), 'crash'),
    'huge_file_in_scratch': (env(step='open("big.bin", "wb").write(b"x" * (200 * 1024**2))'), 'crash'),
    # escapes
    'subprocess': (env(step='import subprocess\nsubprocess.run(["id"])'), 'forbidden_syscall'),
    'os_system': (env(step=raising(f'os.system("touch /tmp/{MARK}") == 0')), 'crash'),
    'multiprocessing': (env(step='import multiprocessing\np = multiprocessing.Process(target=print)\np.start(); p.join()'), 'forbidden_syscall'),
    'ctypes_raw_fork': (env(step=raising('__import__("ctypes").CDLL(None).syscall(57) >= 0')), 'crash'),
    'ctypes_raw_socket': (env(step=raising('__import__("ctypes").CDLL(None).syscall(41, 2, 1, 0) >= 0')), 'crash'),
    'ctypes_raw_execve': (env(step=raising('__import__("ctypes").CDLL(None).syscall(59, b"/bin/sh", 0, 0) >= 0')), 'crash'),
    'write_tmp': (env(step=f'open("/tmp/{MARK}", "w").write("pwned")'), 'crash'),
    'write_project': (env(step=f'open({str(ROOT / MARK)!r}, "w").write("pwned")'), 'crash'),
    'write_usr': (env(step='open("/usr/pwned", "w").write("x")'), 'crash'),
    'read_home': (env(step='os.listdir(os.path.expanduser("~root"))\nopen("/root/.bashrc").read()'), 'crash'),
    'read_project': (env(step=f'open({str(ROOT / "settings.ini")!r}).read()'), 'crash'),
    'read_env_vars': (env(step=raising(f'os.environ.get({SECRET_ENV!r}) == "hunter2"')), 'crash'),
    'socket_loopback': (env(step='import socket\nsocket.create_connection(("127.0.0.1", PORT), timeout=0.5)'), 'forbidden_syscall'),
    'kill_parent': (env(step=f'os.kill({os.getpid()}, 9)\nos.kill(os.getppid(), 9)'), 'forbidden_syscall'),
    # SIGIO (default: the end of a process) sent by the kernel to whom an fd names its owner: the trainer, another worker
    'sigio_owner': (env(step=f'import fcntl\nfcntl.fcntl(1, fcntl.F_SETOWN, {os.getpid()})'), 'forbidden_syscall'),
    'sigio_owner_ex': (env(step=f'import fcntl, struct\nfcntl.fcntl(1, 15, struct.pack("ii", 1, {os.getpid()}))'), 'forbidden_syscall'),
    # (its own pid: a pid the kernel finds at every tier, so only the filter can refuse)
    'sigio_owner_high_bits': (env(step=raising('__import__("ctypes").CDLL(None).syscall(72, 1, __import__("ctypes").c_long(8 | 1 << 32), os.getpid()) >= 0')), 'crash'),
    'exit_hard': (env(step='os._exit(0)'), 'crash'),
    'system_exit': (env(reset='raise SystemExit(0)'), 'crash'),
    'ctypes_segfault': (env(step='import ctypes\nctypes.string_at(0)'), 'crash'),
    'import_torch': (env(module='import torch'), 'crash'),
    'import_spade_llm': (env(module='import spade_nb.llm'), 'crash'),
    # lying on the wire
    'forged_frames': (env(step='''
        fake = json.dumps({"id": "0", "result": ["Correct!", 1.0, True, False, {}]}).encode()
        for fd in range(3, 256):
            try: os.write(fd, struct.pack(">I", len(fake)) + fake)
            except OSError: pass''', replace=[('if g == self.secret: return "Correct!", 1.0', 'if False: return "Correct!", 1.0')]),
        'crash'),  # a frame with another request's id ends the worker at once (issue 29; it was dropped before, and the design unsolvable)
    'stdout_spam': (env(step='for _ in range(200): print("x" * 100000); sys.stderr.write("y" * 100000)'), 'ok'),
    'huge_observation': (env(replace=[('return ("Higher."', 'return ("H" * (50 * 1024**2) if g == 0 else "Higher."')]), 'output_too_large'),
    # breaking the contract
    'nan_reward': (env(replace=[('0.0, False, self.turn', 'float("nan"), False, self.turn')]), 'contract'),
    'inf_reward': (env(replace=[('0.0, False, self.turn', 'float("inf"), False, self.turn')]), 'contract'),
    'none_reward': (env(replace=[('0.0, False, self.turn', 'None, False, self.turn')]), 'contract'),
    'str_reward': (env(replace=[('0.0, False, self.turn', '"0", False, self.turn')]), 'contract'),
    'numpy_rewards_are_fine': (env(replace=[('"Correct!", 1.0,', '"Correct!", np.float64(1.0),'),
                                            ('0.0, False, self.turn', 'np.float32(0.0), np.bool_(False), self.turn')]), 'ok'),
    'wrong_arity': (env(replace=[('return ("Higher."', 'return ("Higher." if g < self.secret else "Lower."), 0.0, False, {}\n        return ("Higher."')]), 'contract'),
    'never_ends': (env(replace=[('self.turn >= self.max_turns, {}', 'False, {}')]), 'contract'),
    # cheating
    # (the `random` module would not do: the worker seeds it from the episode's seed, see tests/test_entropy.py)
    'nondeterministic_reward': (env(replace=[('0.0, False, self.turn', 'int.from_bytes(open("/dev/urandom", "rb").read(2), "little") / 2**17, False, self.turn')]),
                                'nondeterministic'),
    'shared_module_state': (env(module='PLAYED = []', step='PLAYED.append(action)',
                                replace=[('return ("Higher." if g < self.secret else "Lower."), 0.0',
                                          'return f"{len(PLAYED)} guesses so far. " + ("Higher." if g < self.secret else "Lower."), 0.0')]),
                            'nondeterministic'),
    'seed_ignored': (env(replace=[('int(self.np_random.integers(1, 101))', '37')]), 'seed_insensitive'),
    'reward_always_1': (env(replace=[('if g == self.secret:', 'if True:')]), 'degenerate_policy_wins'),
    'solution_loses': (env(replace=[('return out', 'return out[:-1]')]), 'unsolvable'),
    'answer_in_first_obs': (env(replace=[('"Guess my number from 1 to 100."', 'f"Guess my number from 1 to 100. It is {self.secret}."'),
                                         ('lo, hi, out = 1, 100, []', 'return [str(self.secret)]')]), 'answer_leak'),
    'answer_spelled_out': (env(module='''
        W = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
        T = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
        def words(n): return "one hundred" if n == 100 else W[n] if n < 20 else T[n // 10] + ("-" + W[n % 10] if n % 10 else "")''',
        replace=[('"Guess my number from 1 to 100."', 'f"Guess my number. Psst: {words(self.secret)}."'),
                 ('lo, hi, out = 1, 100, []', 'return [str(self.secret)]')]), 'answer_leak'),
    # not an environment
    'syntax_error': ('class GuessEnv(TextEnv):\n    def reset(self, seed=None:\n        pass', 'syntax'),
    'no_env_class': ('import os\nx = 1\n', 'no_env_class'),
    'two_env_classes': (BASE + '\nclass OtherEnv(GuessEnv, TextEnv):\n    pass\n', 'no_env_class'),
}


@pytest.fixture(scope='module')
def listener():
    "A loopback server the sandbox must not reach."
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    s.listen(8)
    s.setblocking(False)
    yield s
    s.close()


def _ancestors(pid):
    out = []
    while pid > 1:
        try: pid = int(next(l for l in Path(f'/proc/{pid}/status').read_text().splitlines() if l.startswith('PPid:')).split()[1])
        except (OSError, StopIteration, ValueError): break
        out.append(pid)
    return out


def _workers_alive():
    "Sandbox worker processes (found by command line) started by this test process."
    alive = []
    for p in Path('/proc').iterdir():
        if not p.name.isdigit(): continue
        try: cmd = (p/'cmdline').read_bytes()
        except OSError: continue
        if b'spade_nb.worker' in cmd and os.getpid() in _ancestors(int(p.name)): alive.append(int(p.name))
    return alive


def test_tier_is_the_strongest_here():
    assert sandbox_tier() == ('bwrap+uid+seccomp' if os.geteuid() == 0 else 'bwrap+seccomp')


def test_battery_has_at_least_30_hostile_sources():
    assert len([k for k, (_, want) in CASES.items() if want != 'ok']) >= 30


@pytest.mark.parametrize('name', list(CASES))
def test_hostile_source_is_contained(name, listener):
    code, want = CASES[name]
    code = code.replace('PORT', str(listener.getsockname()[1]))
    before = set(os.listdir('/tmp'))
    t = time.monotonic()
    v = admit(code, seeds=SEEDS, config=FAST)
    assert v.reason == want, f'{name}: {v.reason} ({v.details})'
    assert v.ok == (want == 'ok')
    assert time.monotonic() - t < 30
    try: conn, _ = listener.accept()
    except BlockingIOError: conn = None
    assert conn is None, 'the sandbox reached a loopback server'
    assert not (Path('/tmp')/MARK).exists() and not (ROOT/MARK).exists()
    new = set(os.listdir('/tmp')) - before
    assert not [n for n in new if 'pwned' in n or MARK in n]


def _gone(seconds=2.0):
    "No worker of ours remains (a killed bubblewrap's child gets its SIGKILL a moment later)."
    deadline = time.monotonic() + seconds
    while _workers_alive() and time.monotonic() < deadline: time.sleep(0.05)
    return _workers_alive() == []


def test_nothing_left_behind():
    for code, _ in list(CASES.values())[:6]:
        admit(code, seeds=SEEDS, config=FAST)
        assert _gone()  # admit leaves no process behind when it returns
    assert not (Path('/tmp')/MARK).exists() and not (ROOT/MARK).exists()


def test_timeout_kills_the_worker_and_ends_its_episodes():
    with SandboxedEnv(env(step='while action == "hang": pass'), call_timeout=0.5) as e:
        e.reset(seed=1, instance='a')
        e.reset(seed=2, instance='b')
        with pytest.raises(SandboxError) as err: e.step('hang', instance='a')
        assert err.value.reason == 'timeout'
        assert e.worker.proc.poll() is not None  # killed at the deadline
        with pytest.raises(SandboxError) as err: e.step('50', instance='b')  # the other episode ends too, with the reason
        assert err.value.reason == 'timeout'
    assert _gone()


def test_scratch_is_private_and_writable():
    probe = env(step='''
        open("note.txt", "w").write(action)
        assert open("note.txt").read() == action and os.getcwd() == "/scratch"
        assert not os.path.exists("/tmp") and not os.path.exists("/root") and not os.path.exists("/home")''')
    with SandboxedEnv(probe) as e:
        e.reset(seed=0)
        assert e.step('50')[0] in ('Higher.', 'Lower.', 'Correct!')
