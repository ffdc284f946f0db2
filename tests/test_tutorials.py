"""The tutorials are committed with their outputs (scripts/refresh_tutorials.py writes them): every code cell that
prints, plots, displays or ends in an expression has an output, and no committed output is an error. The tutorials
themselves run in CI through tests/test_notebooks.py."""
import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT/'nbs'/'tutorials').glob('*.ipynb'))
SHOWING_CALLS = {'print', 'display', 'show', 'Image', 'plot_run', 'imshow'}


def shows_something(source: str) -> bool:
    "Would this cell put something on the page: a print/display/plot call, or a final bare expression not silenced by ';'?"
    lines = [l for l in source.splitlines() if l.strip() and not l.lstrip().startswith(('#', '%', '!'))]
    if not lines: return False
    tree = ast.parse('\n'.join(lines))
    called = {n.func.id if isinstance(n.func, ast.Name) else n.func.attr for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))}
    last = tree.body[-1] if tree.body else None
    return bool(called & SHOWING_CALLS) or (isinstance(last, ast.Expr) and not lines[-1].rstrip().endswith(';'))


def test_the_rule():
    assert shows_something('x = 1\nx') and shows_something('print(1)') and shows_something('plt.show()')
    assert not shows_something('x = 1') and not shows_something('f(x);') and not shows_something('import os')


def test_the_tutorials_are_listed():
    names = {p.stem for p in TUTORIALS}
    assert {'first_run', 'write_your_own_env', 'hint_gap_regret', 'environment_memory', 'single_gpu_experiment',
            'scaling_to_30b'} <= names
    readme = (ROOT/'README.md').read_text()
    assert all(f'nbs/tutorials/{n}.ipynb' in readme for n in names)


@pytest.mark.parametrize('path', TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_outputs_are_committed(path):
    nb = json.loads(path.read_text())
    missing, errors = [], []
    for i, c in enumerate(nb['cells']):
        if c['cell_type'] != 'code': continue
        src = ''.join(c['source'])
        outs = c.get('outputs', [])
        if shows_something(src) and not outs: missing.append(f'cell {i}: {src.splitlines()[0][:60]!r}')
        errors += [f"cell {i}: {o.get('ename')}" for o in outs if o.get('output_type') == 'error']
    assert not errors, f'{path.name} was committed with errors in its outputs: {errors}'
    assert not missing, f'{path.name}: cells without their outputs (run scripts/refresh_tutorials.py {path.stem}): {missing}'
