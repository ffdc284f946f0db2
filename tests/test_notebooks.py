"""Run every notebook in nbs/ as a test, the way `nbdev_test` does, honouring `tst_flags`.

Cells flagged with a flag from settings.ini's `tst_flags` (e.g. `#| slow`, `#| cuda`) are skipped;
set SPADE_NB_TEST_FLAGS="slow cuda" to run those flags too.
"""
import os
from pathlib import Path

import pytest
from nbdev.config import get_config
from nbdev.test import test_nb as run_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT/'nbs').rglob('*.ipynb')
                   if '.ipynb_checkpoints' not in p.parts and not p.name.startswith('_'))


@pytest.mark.parametrize('nb', NOTEBOOKS, ids=[str(p.relative_to(ROOT/'nbs')) for p in NOTEBOOKS])
def test_notebook(nb):
    flags = get_config(path=ROOT).tst_flags.split()
    force = os.environ.get('SPADE_NB_TEST_FLAGS', '').split()
    ok, secs = run_notebook(nb, skip_flags=flags, force_flags=force, showerr=True)
    assert ok, f'{nb.name} failed (its traceback is printed above)'


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 4 and (ROOT/'nbs'/'index.ipynb') in NOTEBOOKS
