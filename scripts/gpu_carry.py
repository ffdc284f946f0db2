"""The carry step: the few wheels a borrowed GPU machine lacks, so that `benchmarks/gpu_check.py` runs there offline.

The GPU machines this project can borrow have Python 3.12, torch (CUDA 13), transformers, accelerate and peft, and
nothing can be fetched there; up to 64 MiB of carried paths travel with the working tree. This script works out, on a
machine where spade_nb is installed, which distributions spade_nb needs beyond that stack (its requirements' closure
less torch's, transformers', accelerate's and peft's; less bitsandbytes, vLLM and pyarrow, too large to carry, and the
widgets' stack, which the check does not use), downloads their wheels for the GPU machine's Python and platform at the
versions installed here, and there installs those it lacks with `pip install --no-index --no-deps`, then spade_nb
itself from the working tree. gpu_check's bitsandbytes and vLLM sections say they are skipped there.

    # here (the registry reachable): about 40 MB
    python scripts/gpu_carry.py download --out gpu-wheels [--interpreter /path/to/python3.12]
    # there, from the repository root (gpu-wheels carried), then the check:
    python scripts/gpu_carry.py install --wheels gpu-wheels && python benchmarks/gpu_check.py --quick --json figures.json

tests/test_gpu_carry.py downloads the wheels for this machine's Python and installs them into a fresh venv with no index.
"""
import argparse
import importlib.metadata as md
import json
import re
import subprocess
import sys
from pathlib import Path

THERE = ('torch', 'transformers', 'accelerate', 'peft')  # what the GPU machines have (../shared/FACTS.md)
LEFT = ('bitsandbytes', 'vllm', 'pyarrow', 'ipywidgets')  # too large to carry, or not used by the check
KEEP = ('matplotlib', 'pandas', 'reasoning-gym', 'gymnasium', 'fastcore')  # what the check's run imports
LIMIT_MB = 60  # of the 64 MiB that travel


def _norm(name: str) -> str: return re.sub(r'[-_.]+', '-', name).lower()


def _requires(name: str) -> list[str]:
    from packaging.requirements import Requirement
    try: reqs = md.requires(name) or []
    except md.PackageNotFoundError: return []
    out = []
    for r in reqs:
        q = Requirement(r)
        if q.marker is None or q.marker.evaluate({'extra': ''}): out.append(q.name)
    return out


def closure(names) -> set[str]:
    "The distributions `names` need, themselves included, as installed here."
    seen, todo = set(), [_norm(n) for n in names]
    while todo:
        n = todo.pop()
        if n not in seen: seen.add(n); todo += [_norm(r) for r in _requires(n)]
    return seen


def carried() -> dict[str, str]:
    "distribution -> the version installed here, for each distribution the GPU machine lacks and the check needs."
    names = closure(['spade-nb']) - closure(THERE) - (closure(LEFT) - closure(KEEP)) - {'spade-nb'}
    return {n: md.version(n) for n in sorted(names)}


def download(out: Path, python: str = '3.12', interpreter: str | None = None) -> list[Path]:
    """The wheels of `carried()` for CPython `python` on manylinux x86-64, into `out`; a distribution published as a
    source archive only (pycosat, zss, cellpylib) is built into a wheel by that Python (`interpreter`, by default
    this one when it is that version, else `python3.12` on PATH)."""
    out.mkdir(parents=True, exist_ok=True)
    tag = python.replace('.', '')
    target = ['--python-version', python, '--implementation', 'cp', '--abi', f'cp{tag}', '--abi', 'abi3', '--abi', 'none',
              *[a for p in ('manylinux_2_28_x86_64', 'manylinux_2_17_x86_64', 'manylinux2014_x86_64', 'manylinux1_x86_64',
                            'linux_x86_64', 'any') for a in ('--platform', p)]]
    built = []
    for name, version in carried().items():
        pin = f'{name}=={version}'
        got = subprocess.run([sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', '--only-binary=:all:', '--dest',
                              str(out), *target, pin], capture_output=True, text=True)
        if got.returncode == 0: continue
        here = sys.version_info[:2] == tuple(map(int, python.split('.')))
        subprocess.run([interpreter or (sys.executable if here else f'python{python}'), '-m', 'pip', 'wheel', '-q', '--no-deps', '--wheel-dir', str(out), pin], check=True)
        built.append(name)
    wheels = sorted(out.glob('*.whl'))
    mb = sum(w.stat().st_size for w in wheels) / 2**20
    print(f'gpu_carry: {len(wheels)} wheels for Python {python}, {mb:.1f} MiB in {out} (limit {LIMIT_MB})'
          + (f'; built from source here: {", ".join(built)}' if built else ''))
    if mb > LIMIT_MB: raise SystemExit(f'gpu_carry: {mb:.1f} MiB is more than the {LIMIT_MB} MiB that travel')
    return wheels


def _dist_of(wheel: Path) -> str: return _norm(wheel.name.split('-')[0])


def install(wheels: Path, repo: Path | None = None, python: str = sys.executable) -> list[str]:
    "Install the wheels in `wheels` whose distribution `python` lacks, with no index and no dependencies; then spade_nb."
    have = subprocess.run([python, '-c', 'import importlib.metadata as m, json; '
                           'print(json.dumps(sorted({d.metadata["Name"] for d in m.distributions()})))'],
                          capture_output=True, text=True, check=True).stdout
    have = {_norm(n) for n in json.loads(have)}
    todo = [w for w in sorted(wheels.glob('*.whl')) if _dist_of(w) not in have]
    if todo:
        subprocess.run([python, '-m', 'pip', 'install', '-q', '--no-index', '--no-deps', *map(str, todo)], check=True)
    print(f'gpu_carry: installed {len(todo)} wheels ({", ".join(_dist_of(w) for w in todo) or "none needed"})')
    if repo is not None:
        subprocess.run([python, '-m', 'pip', 'install', '-q', '--no-index', '--no-deps', '--no-build-isolation', '-e', str(repo)],
                       check=True)
        print(f'gpu_carry: spade_nb installed from {repo}')
    return [_dist_of(w) for w in todo]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    d = sub.add_parser('download', help='here: the wheels the GPU machine lacks')
    d.add_argument('--out', default='gpu-wheels')
    d.add_argument('--python', default='3.12', help="the GPU machine's Python")
    d.add_argument('--interpreter', help='that Python here, to build wheels of source-only packages (default: python3.12)')
    i = sub.add_parser('install', help='there: install them with no index, then spade_nb from this working tree')
    i.add_argument('--wheels', default='gpu-wheels')
    a = ap.parse_args()
    if a.cmd == 'download': download(Path(a.out), a.python, a.interpreter)
    else: install(Path(a.wheels), Path(__file__).resolve().parents[1])
    return 0


if __name__ == '__main__':
    sys.exit(main())
