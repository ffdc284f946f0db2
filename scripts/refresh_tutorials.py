"""Run the tutorials top to bottom and save them with their outputs, so that a reader on the web sees them.

    python scripts/refresh_tutorials.py [NAME ...]     # all of nbs/tutorials/, or the ones named (file stems)

Each notebook runs in its own kernel, in its own folder, with widget state stored (the widgets render on a
static page); then `nbdev_clean` tidies it as CI expects. Commit the result. `tests/test_tutorials.py`
checks that every cell that prints, plots or ends in an expression has its output committed.
"""
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

TUTORIALS = Path(__file__).resolve().parents[1]/'nbs'/'tutorials'


def refresh(path: Path, timeout: int = 900) -> float:
    nb = nbformat.read(path, as_version=4)
    t = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name='python3', resources={'metadata': {'path': str(path.parent)}},
                   store_widget_state=True).execute()
    nbformat.write(nb, path)
    subprocess.run(['nbdev_clean', '--fname', str(path)], check=True)
    return time.perf_counter() - t


def main(names: list[str]) -> int:
    paths = sorted(TUTORIALS.glob('*.ipynb'))
    if names:
        missing = set(names) - {p.stem for p in paths}
        if missing: sys.exit(f'no tutorial named {", ".join(sorted(missing))} in {TUTORIALS}')
        paths = [p for p in paths if p.stem in names]
    for p in paths:
        print(f'{p.name}: {refresh(p):.0f} s', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
