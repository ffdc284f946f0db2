"""Sandbox round two: attacks on the host and on the parent process, one class at a time.

Each attack runs inside a real sandbox worker and reports from inside what it reached (the pid it saw,
the pipe size it set, the errno it got), so that a test cannot pass because the attack code was broken.
After every test, no process of the sandbox uids that test claimed is left in the process table, and
host shared memory is back where it was.
"""
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from spade_nb import sandbox
from spade_nb.admission import AdmissionConfig, admit, admit_many
from spade_nb.sandbox import SandboxedEnv, SandboxError, SandboxLimits, _Worker

ROOT_TIER = os.geteuid() == 0
FAST = AdmissionConfig(limits=SandboxLimits(memory_mb=512, call_timeout=2.0, load_timeout=3.0, start_timeout=20.0))

# An environment whose step runs the attack named by the action (`name` or `name:arg`) and returns its
# report as JSON. The attacks are module-level functions of the generated code, so they run inside the sandbox.
PROBE = '''
import os, sys, json, time, errno, ctypes, threading, struct, fcntl, signal, shutil, tempfile
def _try(f):
    try: return f()
    except BaseException as e: return f"{type(e).__name__}:{getattr(e, 'errno', None)}"
def _libc(): 
    c = ctypes.CDLL(None, use_errno=True); c.syscall.restype = ctypes.c_long; return c
def _raw(nr, *args):
    c = _libc(); r = c.syscall(nr, *args); return r if r >= 0 else -ctypes.get_errno()
def _rid():
    f = sys._getframe()
    while f is not None and 'rid' not in f.f_locals: f = f.f_back
    return f.f_locals['rid']
def _forge(obj):
    data = json.dumps(obj).encode()
    os.write(int(sys.argv[2]), struct.pack('>I', len(data)) + data)
STATE = {}
#ATTACKS

class ProbeEnv(TextEnv):
    max_turns = 4
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        #RESET
        return "probe", {}
    def step(self, action):
        name, _, arg = action.partition(":")
        return json.dumps(globals()["attack_" + name](arg)), 0.0, True, False, {}
    def solution(self): return ["noop"]
'''


def probe(attacks: str, reset: str = '') -> str:
    src = PROBE.replace('#ATTACKS', textwrap.dedent(attacks).strip('\n') + '\ndef attack_noop(arg): return {}')
    return src.replace('        #RESET', textwrap.indent(textwrap.dedent(reset).strip('\n'), '        ') if reset else '')


def report(env: SandboxedEnv, action: str) -> dict:
    env.reset(seed=0)
    return json.loads(env.step(action)[0])


def shmem_kb() -> int:
    return int(next(l for l in Path('/proc/meminfo').read_text().splitlines() if l.startswith('Shmem:')).split()[1])


def procs_of(uids) -> list[int]:
    "Pids of live processes whose uid is one of `uids`, read from the process table."
    out = []
    for p in os.scandir('/proc'):
        if p.name.isdigit():
            try:
                if p.stat().st_uid in uids: out.append(int(p.name))
            except OSError: pass
    return out


# Tests that fill a tmpfs hold this lock exclusively, the others shared, so that no check of shared memory
# runs while another test of this file (on another xdist worker) has hundreds of MB in a sandbox's tmpfs.
SHM_LOCK = Path(tempfile.gettempdir())/f'spade_nb-test-shmem-{os.geteuid()}.lock'
FILLS_TMPFS = ('test_a_thread_filling_the_scratch_between_calls_is_bounded', 'test_tmpfs_counts_against_the_memory_limit')


@pytest.fixture(autouse=True)
def host_is_clean(monkeypatch, request):
    "Record the sandbox uids a test claims; afterwards none of them has a process, and shared memory is back."
    lock = open(SHM_LOCK, 'a')
    fcntl.flock(lock, fcntl.LOCK_EX if request.node.name in FILLS_TMPFS else fcntl.LOCK_SH)
    request.addfinalizer(lock.close)
    claimed, real = set(), sandbox._claim_uid
    def claim():
        uid, fd = real()
        claimed.add(uid)
        return uid, fd
    monkeypatch.setattr(sandbox, '_claim_uid', claim)
    before = shmem_kb()
    yield claimed
    sandbox._kill_all()
    deadline = time.monotonic() + 5
    while procs_of(claimed) and time.monotonic() < deadline: time.sleep(0.05)
    assert procs_of(claimed) == [], f'processes of sandbox uids {sorted(claimed)} outlived the test'
    assert shmem_kb() - before < 40 * 1024, f'host shared memory grew by {(shmem_kb() - before) // 1024} MB'


# -- 1. nothing outside the worker is writable or reachable from inside ------------------------------------------

PROC_ATTACKS = '''
def attack_init(arg):
    return {"pid": os.getpid(), "procs": [p for p in range(1, 4096) if os.path.exists(f"/proc/{p}")], "list_proc": _try(lambda: os.listdir("/proc")),
            "init_name": open("/proc/1/status").read().split()[1],
            "open_init_mem_rw": _try(lambda: os.open("/proc/1/mem", os.O_RDWR) and "opened"),
            "ptrace_attach_1": _raw(101, 16, 1, 0, 0), "process_vm_writev_1": _raw(311, 1, 0, 0, 0, 0, 0)}
def attack_mem(arg):
    pid = int(arg)
    return {"exists": os.path.exists(f"/proc/{pid}"), "uid": _try(lambda: os.stat(f"/proc/{pid}").st_uid),
            "open_mem_rw": _try(lambda: os.open(f"/proc/{pid}/mem", os.O_RDWR) and "opened"),
            "open_mem_ro": _try(lambda: os.open(f"/proc/{pid}/mem", os.O_RDONLY) and "opened"),
            "kill": _raw(62, pid, 0)}
def attack_threads(arg):
    for _ in range(4): threading.Thread(target=time.sleep, args=(600,), daemon=False).start()
    return {"threads": threading.active_count(), "fork": _raw(57), "vfork": _raw(58)}
'''


def test_worker_is_pid_1_and_alone(host_is_clean):
    with SandboxedEnv(probe(PROC_ATTACKS)) as env:
        r = report(env, 'init')
    assert r['pid'] == 1 and r['procs'] == [1] and r['init_name'].startswith('python'), r  # no bubblewrap init to write into
    assert r['list_proc'] == 'PermissionError:13', r  # its own entry is all of /proc it may read
    assert r['open_init_mem_rw'] == 'PermissionError:13', r  # its own memory, and even that is closed to writes
    assert r['ptrace_attach_1'] == -38 and r['process_vm_writev_1'] == -38, r


@pytest.mark.skipif(not ROOT_TIER, reason='the uid tier needs root')
def test_without_namespaces_the_parent_and_other_workers_are_unreachable():
    "At the uid+seccomp tier the worker sees the host's processes: Landlock keeps their memory closed."
    other = _Worker('uid+seccomp', SandboxLimits()).wait_ready()
    try:
        with SandboxedEnv(probe(PROC_ATTACKS), worker=_Worker('uid+seccomp', SandboxLimits())) as env:
            assert env.worker.hello['landlock'] >= 1
            for target in (os.getpid(), other.proc.pid, 1):
                r = report(env, f'mem:{target}')
                assert r['exists'] is True, r  # the attack addresses a live process
                assert r['open_mem_rw'].startswith('PermissionError') and r['open_mem_ro'].startswith('PermissionError'), (target, r)
                assert r['kill'] == -38, r
    finally:
        other.kill()


def test_landlock_alone_keeps_the_trainer_memory_closed():
    "The `seccomp` tier's case: no namespaces and no uid change (here even root's); Landlock alone must hold."
    with SandboxedEnv(probe(PROC_ATTACKS), worker=_Worker('seccomp', SandboxLimits())) as env:
        assert env.worker.hello['landlock'] >= 1 and env.worker.hello['uid'] == os.getuid()
        r = report(env, f'mem:{os.getpid()}')
    assert r['exists'] is True and r['uid'] == os.getuid(), r  # the trainer is visible and has the worker's own uid
    assert r['open_mem_rw'].startswith('PermissionError') and r['open_mem_ro'].startswith('PermissionError'), r


HOST_PROC = ['/proc/uptime', '/proc/loadavg', '/proc/stat', '/proc/meminfo', '/proc/pressure/cpu', '/proc/sys/kernel/random/boot_id']  # (/proc/net is /proc/self/net: its own)
READ_ATTACKS = f'HOST_PROC = {HOST_PROC!r}\n' + '''
def attack_read(arg):
    paths = [arg, "/etc/passwd", "/root", "/home", "/proc/1/environ", "/proc/self/status", json.decoder.__file__, *HOST_PROC]
    return {p: _try(lambda: (os.listdir(p) if os.path.isdir(p) else open(p).read(64)) and "read") for p in paths}
'''


@pytest.mark.skipif(not ROOT_TIER, reason='forcing the weaker tiers needs root here')
@pytest.mark.parametrize('tier', ['uid+seccomp', 'seccomp'])
def test_without_namespaces_the_user_files_are_not_readable(tier):
    "Landlock gives the worker bubblewrap's narrow view: its interpreter, its packages, the system's libraries."
    project_file = str(Path(__file__).resolve().parents[1]/'settings.ini')  # world-readable, in the project
    with SandboxedEnv(probe(READ_ATTACKS), worker=_Worker(tier, SandboxLimits())) as env:
        r = report(env, f'read:{project_file}')
    assert r['/proc/self/status'] == 'read' and r[next(k for k in r if k.endswith('decoder.py'))] == 'read', r  # the reads work
    for path in (project_file, '/etc/passwd', '/root', '/home', '/proc/1/environ', *HOST_PROC):
        assert r[path].startswith(('PermissionError', 'FileNotFoundError')), (tier, path, r[path])


def test_the_host_is_not_readable_through_proc():
    "A pid namespace hides other processes, not the host: uptime (a real clock), load (the trainer busy or idle), memory, boot id."
    project_file = str(Path(__file__).resolve().parents[1]/'settings.ini')
    with SandboxedEnv(probe(READ_ATTACKS)) as env:
        assert env.worker.hello['landlock'] >= 1
        r = report(env, f'read:{project_file}')
    assert r['/proc/self/status'] == 'read', r
    for path in (project_file, *HOST_PROC):
        assert r[path].startswith(('PermissionError', 'FileNotFoundError')), (env.tier, path, r[path])
    assert r['/proc/uptime'].startswith('PermissionError'), r  # it exists: the refusal is Landlock's


def test_threads_and_forks_do_not_outlive_close(host_is_clean):
    with SandboxedEnv(probe(PROC_ATTACKS)) as env:
        r = report(env, 'threads')
        assert r['threads'] >= 5 and r['fork'] == -38 and r['vfork'] == -38, r
        uid = env.worker.uid if env.worker.uid != os.getuid() else None  # as an ordinary user, the worker has ours
        pids = [p for p in (env.worker.proc.pid, env.worker.child_pid) if p]
        assert all(Path(f'/proc/{p}').exists() for p in pids) and (uid is None or procs_of({uid}))
        cg = env.worker.cgroup
        assert cg is None or len(cg.pids()) >= 1
    deadline = time.monotonic() + 3
    while (any(Path(f'/proc/{p}').exists() for p in pids) or uid and procs_of({uid})) and time.monotonic() < deadline: time.sleep(0.05)
    assert not any(Path(f'/proc/{p}').exists() for p in pids) and not (uid and procs_of({uid}))
    if cg is not None: assert not any(d.exists() for d in cg.dirs), 'the cgroup was removed'


# -- 2. no unbounded tmpfs ------------------------------------------------------------------------------------------

TMPFS_ATTACKS = '''
def attack_write(arg):
    out = {}
    for path in ("/big", "/dev/big", "/dev/shm/big", "/tmp", "/opt/spade/big", "/usr/big", "/scratch/ok"):
        out[path] = _try(lambda: ((os.mkdir(path) if path == "/tmp" else open(path, "wb").write(b"x" * 4096)), "written")[1])
    out["memfd"] = _raw(319, b"x", 0)
    return out
def _fill(prefix):
    n, chunk = 0, b"y" * (1 << 20)
    try:
        while n < 2000:
            with open(f"/scratch/{prefix}{n}", "wb") as f: f.write(chunk)
            n += 1
        STATE["err"] = "none"
    except OSError as e: STATE["err"] = e.errno
    STATE["mb"] = n
def attack_fill(arg):
    threading.Thread(target=_fill, args=("f",)).start()
    return {"started": True}
def attack_report(arg): return dict(STATE)
'''


def test_only_the_scratch_is_writable():
    with SandboxedEnv(probe(TMPFS_ATTACKS)) as env:
        r = report(env, 'write')
    assert r['/scratch/ok'] == 'written', r  # the attack code works where writing is allowed
    for path in ('/big', '/dev/big', '/dev/shm/big', '/tmp', '/opt/spade/big', '/usr/big'):
        assert r[path].split(':')[1] in ('30', '13', '2'), (path, r[path])  # EROFS, EACCES, ENOENT
    assert r['memfd'] == -38


def test_a_thread_filling_the_scratch_between_calls_is_bounded():
    before = shmem_kb()
    with SandboxedEnv(probe(TMPFS_ATTACKS), scratch_mb=32) as env:
        assert report(env, 'fill') == {'started': True}
        time.sleep(1.5)  # the parent sits idle: no call deadline runs
        grown = shmem_kb() - before
        r = report(env, 'report')
    assert r['err'] == 28 and 28 <= r['mb'] <= 32, r  # ENOSPC at the cap
    assert grown < 40 * 1024, f'shared memory grew by {grown // 1024} MB while idle'


@pytest.mark.skipif(not ROOT_TIER, reason='a worker cgroup needs root or a delegated cgroup')
def test_tmpfs_counts_against_the_memory_limit():
    "With a scratch larger than the memory limit, the cgroup stops the writes (or kills the worker) first."
    with SandboxedEnv(probe(TMPFS_ATTACKS), memory_mb=320, scratch_mb=1024) as env:
        assert env.worker.cgroup is not None
        assert report(env, 'fill') == {'started': True}
        time.sleep(2.0)
        try:
            r = report(env, 'report')
            assert r['mb'] < 320 and r['err'] != 'none', r  # the writes stopped below the memory limit
        except SandboxError as e:
            assert e.reason == 'memory', e  # or the worker was killed for it, and says so


# -- 3. the parent never blocks on a worker -------------------------------------------------------------------------

PIPE_ATTACKS = '''
def _answer_then(after):
    rid = _rid()
    req = int(sys.argv[1])
    fcntl.fcntl(req, 1031, 4096)  # F_SETPIPE_SZ
    size = fcntl.fcntl(req, 1032)  # F_GETPIPE_SZ
    _forge({"id": rid, "result": [f"rid {rid} pipe {size}", 0.0, False, False, {}]})
    after()
def attack_shrink_sleep(arg): _answer_then(lambda: time.sleep(10 ** 6))
def attack_shrink_close(arg): _answer_then(lambda: (os.close(int(sys.argv[1])), time.sleep(10 ** 6)))
def _trickle():
    time.sleep(0.3)  # after this call's own reply
    os.write(int(sys.argv[2]), struct.pack(">I", 200))
    while True: os.write(int(sys.argv[2]), b" "); time.sleep(0.2)
def attack_trickle(arg):
    threading.Thread(target=_trickle, daemon=True).start()
    return {"started": True}
'''


@pytest.mark.parametrize('attack', ['shrink_sleep', 'shrink_close'])
def test_a_worker_that_stops_reading_cannot_block_the_parent(attack):
    with SandboxedEnv(probe(PIPE_ATTACKS), call_timeout=1.0) as env:
        env.reset(seed=0)
        obs = env.step(attack)[0]
        assert obs.startswith('rid ') and obs.endswith('pipe 4096'), obs  # it answered by itself and shrank the pipe
        t = time.monotonic()
        with pytest.raises(SandboxError) as err: env.step('é' * 4000)  # an 8 KB request into a 4 KB pipe nobody reads
        assert time.monotonic() - t < 10.0  # the attack sleeps 10**6 s: any bound far under that shows the parent was not blocked
        assert err.value.reason in ('timeout', 'crash'), err.value
        assert env.worker.proc.poll() is not None


def test_a_reply_trickled_byte_by_byte_times_out():
    with SandboxedEnv(probe(PIPE_ATTACKS), call_timeout=1.0) as env:
        assert report(env, 'trickle') == {'started': True}
        time.sleep(0.6)  # the header and the first bytes are in the pipe
        t = time.monotonic()
        with pytest.raises(SandboxError) as err: report(env, 'noop')
        assert err.value.reason in ('timeout', 'protocol'), err.value
        assert time.monotonic() - t < 10.0  # the attack sleeps 10**6 s: any bound far under that shows the parent was not blocked


# -- 4. admission never raises ------------------------------------------------------------------------------------

GAME = '''
import json, os, sys, struct
WORDS = "one two three four five six seven eight nine".split()
#MODULE
class CountEnv(TextEnv):
    max_turns = 12
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.k, self.turn = int(self.np_random.integers(0, 9)), 0
        #RESET
        return "Say the words.", {}
    def expected(self):
        return [(WORDS[self.k] + PAD)[:4096]] + [PAD[:4096]] * 9
    def step(self, action):
        #STEP
        ok = action == self.expected()[self.turn]
        self.turn += 1
        if not ok: return "Wrong.", 0.0, True, False, {}
        if self.turn == 10: return "Right.", 1.0, True, False, {}
        return "Go on.", 0.0, False, False, {}
    def solution(self): return self.expected()
'''


def game(module='', reset='', step=''):
    src = GAME
    for hook, code in (('#MODULE', module), ('        #RESET', reset), ('        #STEP', step)):
        src = src.replace(hook, textwrap.indent(textwrap.dedent(code).strip('\n'), '' if hook == '#MODULE' else '        '))
    return src


FORGE = '''
def _forge_raw(result):
    f = sys._getframe()
    while 'rid' not in f.f_locals: f = f.f_back
    data = ('{"id": "%s", "result": %s}' % (f.f_locals["rid"], result)).encode()
    os.write(int(sys.argv[2]), struct.pack(">I", len(data)) + data)
'''


@pytest.mark.parametrize('name,code,want', [
    ('hundreds_in_solution', game(module='PAD = " hundred" * 500'), 'ok'),  # 5,000 hundreds across the solution
    ('hundreds_with_and', game(module='PAD = " and hundred" * 370'), 'ok'),
    ('deep_list_reply', game(module=FORGE + 'PAD = " x"', step='if self.turn == 3: _forge_raw("[" * 900 + "]" * 900)'), 'crash'),
    ('deep_dict_reply', game(module=FORGE + 'PAD = " x"', step='if self.turn == 3: _forge_raw(\'{"a":\' * 900 + "1" + "}" * 900)'), 'crash'),
    ('deeper_than_json', game(module=FORGE + 'PAD = " x"', reset='_forge_raw("[" * 100000 + "]" * 100000)'), 'crash'),
])
def test_admission_returns_a_verdict_whatever_the_environment_sends(name, code, want):
    v = admit(code, seeds=[0, 1, 2, 3], config=FAST)
    assert v.reason == want, (name, v.reason, v.details)
    if 'deep' in name: assert 'depth' in v.details or 'malformed' in v.details, v.details  # the deep reply reached the parent


def test_a_check_that_raises_is_a_rejection_and_the_batch_goes_on(monkeypatch):
    import spade_nb.admission as adm
    src = game(module='PAD = " x"')
    def broken(kind, actions, common_actions=()): raise ValueError('Exceeds the limit (4300 digits) for integer string conversion')
    monkeypatch.setattr(adm, 'leak_targets', broken)  # the leak check's parser, raising as the unbounded number words once did
    v = admit(src, config=FAST)
    assert (v.ok, v.reason) == (False, 'checker_error') and 'ValueError' in v.details
    monkeypatch.setattr(adm, 'admit', lambda *a, **k: (_ for _ in ()).throw(RecursionError('deep')))
    out = admit_many([src, None, src], [[1, 2], None, [3, 4]], config=FAST, parallel=2)
    assert [None if v is None else v.reason for v in out] == ['checker_error', None, 'checker_error']


# -- 5. background CPU is capped ------------------------------------------------------------------------------------

CPU_ATTACKS = '''
def _burn():
    while True: pass
def attack_burn(arg):
    for _ in range(int(arg)): threading.Thread(target=_burn, daemon=True).start()
    return {"threads": threading.active_count()}
def attack_later(arg):
    threading.Timer(0.2, lambda: [threading.Thread(target=_burn, daemon=True).start() for _ in range(3)]).start()
    return {"threads": threading.active_count()}
'''


def cpu_seconds(worker) -> float:
    tick, total = os.sysconf('SC_CLK_TCK'), 0
    for pid in worker.cgroup.pids():
        try: fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
        except OSError: continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


@pytest.mark.skipif(not ROOT_TIER, reason='a CPU quota needs a worker cgroup')
@pytest.mark.parametrize('attack', ['burn:4', 'later:'])
def test_background_cpu_is_capped(attack):
    with SandboxedEnv(probe(CPU_ATTACKS), cpu_share=0.25) as env:
        r = report(env, attack)
        assert r['threads'] >= 2, r
        time.sleep(0.4)
        c0, t0 = cpu_seconds(env.worker), time.monotonic()
        time.sleep(2.0)  # the parent idles while the threads burn
        used, wall = cpu_seconds(env.worker) - c0, time.monotonic() - t0
    assert used > 0.05, 'the threads did burn'
    assert used <= 0.25 * wall * 1.5 + 0.1, f'{used:.2f} CPU-s in {wall:.2f} s at a 0.25-core quota'


# -- 6. uids are unique across processes ------------------------------------------------------------------------------

CLAIMER = '''
import json, sys
from spade_nb.sandbox import _claim_uid
claims = [_claim_uid() for _ in range(40)]
print(json.dumps([u for u, _ in claims]), flush=True)
sys.stdin.read()
'''


@pytest.mark.skipif(not ROOT_TIER, reason='uids are per worker only as root')
def test_two_processes_never_share_a_uid():
    procs = [subprocess.Popen([sys.executable, '-c', CLAIMER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(3)]
    try:
        sets = [json.loads(p.stdout.readline()) for p in procs]
    finally:
        for p in procs: p.stdin.close(); p.wait(timeout=30)
    flat = [u for s in sets for u in s]
    assert len(flat) == 120 and len(set(flat)) == 120


@pytest.mark.skipif(not ROOT_TIER, reason='uids are per worker only as root')
def test_threads_never_share_a_uid_and_a_uid_in_use_is_skipped(host_is_clean):
    out, lock = [], threading.Lock()
    def grab():
        for _ in range(10):
            c = sandbox._claim_uid()
            with lock: out.append(c)
    ts = [threading.Thread(target=grab) for _ in range(6)]
    for t in ts: t.start()
    for t in ts: t.join()
    try: assert len({u for u, _ in out}) == 60
    finally:
        for _, fd in out: os.close(fd)
    # a live process that is not ours holds the next uid in line: it is skipped
    slot = sandbox._uid_next[0]
    squatter = subprocess.Popen(['sleep', '30'], user=sandbox._UID_BASE + slot % sandbox._UID_SLOTS)
    try:
        uid, fd = sandbox._claim_uid(); os.close(fd)
        assert uid != sandbox._UID_BASE + slot % sandbox._UID_SLOTS
    finally:
        squatter.kill(); squatter.wait()


# -- 7. observations are text ----------------------------------------------------------------------------------------

OBS = '''
class LyingStr(str):
    def __len__(self): return 0
class AnySpace:
    def contains(self, x): return True
class ObsEnv(TextEnv):
    max_turns = 3
    def __init__(self):
        super().__init__()
        #INIT
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.x = int(self.np_random.integers(0, 100))
        return RESET_OBS, {}
    def step(self, action):
        return STEP_OBS, float(action == str(self.x)), True, False, {}
    def solution(self): return [str(self.x)]
'''


@pytest.mark.parametrize('reset_obs,step_obs,init,want', [
    ('b"bytes"', '"ok"', '', 'contract'),
    ('"What number?"', 'b"done"', '', 'contract'),
    ('"What number?"', '42', 'self.observation_space = AnySpace()', 'contract'),  # a space that accepts anything
    ('"What number?"', '["done"]', '', 'contract'),
    ('LyingStr("q" * 100000)', '"done"', '', 'output_too_large'),  # a str claiming to be empty
])
def test_observations_must_be_text(reset_obs, step_obs, init, want):
    code = OBS.replace('RESET_OBS', reset_obs).replace('STEP_OBS', step_obs).replace('#INIT', init or 'pass')
    v = admit(code, config=FAST)
    assert v.reason == want, (v.reason, v.details)


LONG_TEXT = {  # the worker's own check, made to pass: a declared wider space, a patched check, a space that accepts anything
    'declared': dict(replace=[('    max_turns = 8', '    max_turns = 8\n    max_observation_chars = 10**7')]),
    'patched': dict(module='import spade_nb.worker as w\nw._bad_observation = lambda env, obs: None'),
    'any_space': dict(init='self.observation_space = type("S", (), {"contains": lambda s, x: True})()'),
}


@pytest.mark.parametrize('how', list(LONG_TEXT))
def test_a_long_observation_only_play_reaches_is_caught_in_play(how):
    "Admission never plays 'zzz'; in play the parent caps the observation, whatever the worker's check said, and fails the environment."
    from spade_nb.rollout import EnvJob, RolloutConfig, play
    from spade_nb.testing import guessing_game, scripted_policy
    how_ = {**LONG_TEXT[how]}
    how_['replace'] = how_.get('replace', []) + [('return ("Higher."', 'return ("B" * 100_000 if action == "zzz" else "Higher."')]
    code = guessing_game(**how_)
    v = admit(code, seeds=[11, 12, 13], config=FAST)
    assert v.ok, (how, v.reason, v.details)
    res = play(scripted_policy(lambda text, k: '\\boxed{zzz}'), [EnvJob('long', code, seeds=[11], replays=v.replays)],
               RolloutConfig(max_turns=3, max_new_tokens=8, demonstrations=0), seed=0)
    assert res.failures == {'long': 'output_too_large'}, (how, res.failures)


FILL = dict(module='import threading\nN = [0]', step='''
    if action.startswith("fill"):
        _, n, mb = action.split()
        for _ in range(int(n)):
            N[0] += 1
            with open(f"f{N[0]}.bin", "wb") as f: f.write(b"x" * (int(mb) << 20))
        return "filled", 0.0, False, False, {}
    if action == "later":
        def write():
            time.sleep(0.3)
            for i in range(3):
                with open(f"late{i}.bin", "wb") as f: f.write(b"x" * (4 << 20))
        threading.Thread(target=write).start()
        return "later", 0.0, False, False, {}''')


@pytest.mark.skipif(not ROOT_TIER, reason='forcing the weaker tiers needs root here')
@pytest.mark.parametrize('tier', ['uid+seccomp', 'seccomp'])
def test_a_host_scratch_folder_is_measured_after_every_call(tier):
    "Without bubblewrap's tmpfs, scratch is a host folder: more than scratch_mb (or 10,000 entries) after a call ends the worker and removes it."
    from spade_nb.testing import guessing_game
    # a generous deadline: 10,001 files take well under a second alone, but CI's other worker can make it seconds
    code, limits = guessing_game(**FILL), SandboxLimits(scratch_mb=8, file_mb=4, call_timeout=60)
    with SandboxedEnv(code, worker=_Worker(tier, limits)) as env:
        scratch = env.worker.scratch
        env.reset(seed=1)
        assert env.step('fill 1 2')[0] == 'filled' and os.path.isdir(scratch)  # 2 MB of 8
        with pytest.raises(SandboxError, match='output_too_large: the scratch folder holds'): env.step('fill 3 4')  # 14 MB
        assert env.worker.dead and not os.path.exists(scratch)
    with SandboxedEnv(code, worker=_Worker(tier, limits)) as env:  # written by a thread after its call replied
        env.reset(seed=1)
        assert env.step('later')[0] == 'later'
        time.sleep(1.5)
        with pytest.raises(SandboxError, match='output_too_large'): env.step('50')
    with SandboxedEnv(code, worker=_Worker(tier, limits)) as env:  # empty files, in number
        env.reset(seed=1)
        with pytest.raises(SandboxError, match='too many files'): env.step('fill 10001 0')


# -- 8. what ordinary environments use works; what the filter blocks is named -------------------------------------

ORDINARY = '''
import os, shutil, signal, tempfile, json, threading
from pathlib import Path
class NotesEnv(TextEnv):
    max_turns = 4
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.secret = str(int(self.np_random.integers(100, 1000)))
        with tempfile.NamedTemporaryFile("w", delete=False, suffix=".txt") as f: f.write(self.secret); self.path = f.name
        with tempfile.TemporaryFile() as t: t.write(b"x"); t.seek(0); assert t.read() == b"x"
        d = tempfile.mkdtemp()
        shutil.copy(self.path, os.path.join(d, "copy.txt")); shutil.copytree(d, d + "-tree")
        os.chmod(self.path, 0o600); os.utime(self.path, None)
        signal.setitimer(signal.ITIMER_REAL, 0); signal.alarm(0)
        home = Path.home(); assert home.is_dir()
        t = threading.Thread(target=lambda: None); t.start(); t.join()
        return "A number is written down. Guess it.", {}
    def step(self, action):
        written = open(self.path).read()
        return ("Right." if action == written else "Wrong."), float(action == written), True, False, {}
    def solution(self): return [open(self.path).read()]
'''


def test_ordinary_code_is_admitted():
    v = admit(ORDINARY, config=FAST)
    assert v.ok, (v.reason, v.details)


@pytest.mark.parametrize('call', ['socket.socketpair()', 'asyncio.run(asyncio.sleep(0))', 'os.posix_spawn("/bin/true", ["true"], {})',
                                  'os.setuid(0)', 'resource.setrlimit(resource.RLIMIT_CPU, (1000, 1000))', 'os.statvfs("/")', 'os.uname()'])
def test_a_blocked_call_that_ends_an_episode_is_named(call):
    code = ORDINARY.replace('import os,', 'import socket, asyncio, resource, os,').replace(
        '        written = open(self.path).read()', f'        {call}\n        written = open(self.path).read()')
    v = admit(code, config=FAST)
    assert v.reason == 'forbidden_syscall', (call, v.reason, v.details)


def test_every_seed_environment_is_still_admitted():
    "Three admissions of each seed environment on fresh random seeds, through the hardened sandbox."
    from spade_nb.seeds import seed_sources
    sources = seed_sources()
    names = [n for n in sources for _ in range(3)]
    verdicts = admit_many([sources[n] for n in names], [None] * len(names), parallel=2)
    assert [(n, v.reason) for n, v in zip(names, verdicts) if not v.ok] == []
