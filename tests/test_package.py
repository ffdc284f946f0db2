"Packaging promises: a light import, a console script, one version."
import configparser
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_does_not_load_torch():
    mods = 'core embedded llm engines policy envs protocol worker sandbox admission seeds corpus designer hints memory heldout rollout regret trainer selfplay plan evaluate cli'
    imports = '; '.join(f'import spade_nb.{m}' for m in mods.split())
    code = (f"import sys, spade_nb; {imports}; "
            "heavy = [m for m in ('torch', 'transformers', 'peft') if m in sys.modules]; "
            "assert not heavy, heavy")
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_version_matches_settings():
    import spade_nb
    cfg = configparser.ConfigParser(delimiters=['='])
    cfg.read(ROOT/'settings.ini')
    assert spade_nb.__version__ == cfg['DEFAULT']['version']


SPADE = shutil.which('spade') or str(Path(sys.executable).parent/'spade')


def test_console_script_reports_bad_input_in_one_line():
    r = subprocess.run([SPADE, 'generate', 'hi', '--max-new-tokens', '0'], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip() == 'spade generate: error: max_new_tokens: must be at least 1 (got 0)'
    r = subprocess.run([SPADE, 'nonsense'], capture_output=True, text=True)
    assert r.returncode == 2 and 'invalid choice' in r.stderr


def _module_imports() -> dict[str, set[str]]:
    "Each spade_nb module and the spade_nb modules it imports, at the top or inside a function."
    import ast
    out = {}
    for p in sorted((ROOT/'spade_nb').glob('*.py')):
        if p.stem in ('__init__', '_modidx'): continue
        deps = set()
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.ImportFrom) and n.level:  # from .x import y, from . import x
                deps.update([n.module.split('.')[0]] if n.module else [a.name for a in n.names])
            elif isinstance(n, ast.ImportFrom) and (n.module or '').startswith('spade_nb.'):
                deps.add(n.module.split('.')[1])
            elif isinstance(n, ast.Import):
                deps.update(a.name.split('.')[1] for a in n.names if a.name.startswith('spade_nb.'))
        out[p.stem] = deps - {p.stem}
    return out


def test_no_import_cycle_between_modules():
    "The modules form a tree of dependencies: a reader can take them in order, each after what it needs."
    graph, cycles = _module_imports(), []
    def visit(m, path):
        if m in path: cycles.append(path[path.index(m):] + [m]); return
        for d in sorted(graph.get(m, ())): visit(d, path + [m])
    for m in graph: visit(m, [])
    assert not cycles, sorted({' -> '.join(c) for c in cycles})[:5]


def test_methods_sit_in_their_class_or_are_patched():
    "No `Class.method = _function` after a class: a method is in the class body, or added with `@patch` (readers and type checkers see a method)."
    import re
    found = [f'{p.name}:{i}: {line}' for p in sorted((ROOT/'spade_nb').glob('*.py')) if p.name != '_modidx.py'
             for i, line in enumerate(p.read_text().splitlines(), 1) if re.match(r'^_?[A-Z]\w*\.\w+(, _?[A-Z]\w*\.\w+)* = ', line)]
    assert not found, found


def test_each_notebooks_examples_use_only_earlier_notebooks():
    "A reader who goes from 00 upward meets each module after what it needs: no example imports a later notebook's module."
    import json
    import re
    nbs = sorted((ROOT/'nbs').glob('*.ipynb'))
    home = {m.group(1): p.name for p in nbs for c in json.loads(p.read_text())['cells']
            if (m := re.search(r'#\| default_exp (\w+)', ''.join(c['source'])))}
    order = {p.name: k for k, p in enumerate(nbs)}
    later = [f'{p.name} uses {mod} ({home[mod]})' for p in nbs if p.name != 'index.ipynb'
             for c in json.loads(p.read_text())['cells'] if c['cell_type'] == 'code'
             for mod in re.findall(r'(?:from|import) spade_nb\.(\w+)', ''.join(c['source']))
             if mod in home and order[home[mod]] > order[p.name]]
    assert not later, later


def _export_cells():
    import json
    for p in sorted((ROOT/'nbs').rglob('*.ipynb')):
        for c in json.loads(p.read_text())['cells']:
            src = ''.join(c['source'])
            if c['cell_type'] == 'code' and src.startswith('#| export'): yield p.relative_to(ROOT/'nbs'), c.get('id'), src


def _a_seed_environment(src: str) -> bool:
    """Is the cell one seed environment class? The designer reads each whole as an exemplar (`seed_sources`), and the
    recorded designs of tests/data copy them: they keep their structure, whatever their length."""
    import ast
    from spade_nb.seeds import SEED_ENVS
    body = ast.parse(src).body
    return len(body) == 1 and isinstance(body[0], ast.ClassDef) and body[0].name in {c.__name__ for c in SEED_ENVS}


def test_export_cells_are_short():
    "A definition a reader can see whole: no export cell over 60 lines (split a class with `@patch`, a module by idea)."
    long = [f'{p} cell {cid}: {src.count(chr(10)) + 1} lines ({src.splitlines()[1][:60]!r})'
            for p, cid, src in _export_cells() if src.count('\n') + 1 > 60 and not _a_seed_environment(src)]
    assert not long, long


def test_library_lines_are_short():
    "No line over 120 characters in spade_nb/, but the generated _modidx.py and the `__all__` line nbdev writes."
    long = [f'{p.name}:{i}: {len(line)} characters' for p in sorted((ROOT/'spade_nb').glob('*.py')) if p.name != '_modidx.py'
            for i, line in enumerate(p.read_text().splitlines(), 1) if len(line) > 120 and not line.startswith('__all__ = ')]
    assert not long, long


def test_the_iteration_reads_on_one_screen():
    "`SelfPlay.iteration` is the method's order in at most 35 lines; the stages hold the detail."
    import inspect
    from spade_nb.selfplay import SelfPlay
    n = len(inspect.getsource(SelfPlay.iteration).splitlines())
    assert n <= 35, f'SelfPlay.iteration is {n} lines'


def test_cells_that_load_a_real_model_are_slow():
    "`nbdev_test` stays quick for a reader: a cell that loads the embedded or a hub model is `#| slow` (CI runs it)."
    import json
    import re
    unflagged = []
    for p in sorted((ROOT/'nbs').rglob('*.ipynb')):
        for c in json.loads(p.read_text())['cells']:
            src = ''.join(c['source'])
            if c['cell_type'] != 'code' or src.startswith('#| export') or re.search(r'^#\| (slow|cuda|vllm)', src, re.M):
                continue
            calls = [line for line in src.splitlines() if re.search(r'\bload_(hf_)?policy\(', line)
                     and 'LLMConfig(model=' not in line]  # a folder the cell saved itself (a tiny model) is quick
            if calls: unflagged.append(f'{p.relative_to(ROOT/"nbs")} cell {c.get("id")}: {calls[0].strip()[:80]}')
    assert not unflagged, unflagged
