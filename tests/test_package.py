"Packaging promises: a light import, a console script, one version."
import configparser
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_does_not_load_torch():
    mods = 'core embedded llm envs protocol worker sandbox admission seeds corpus designer hints memory rollout regret trainer selfplay cli'
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
