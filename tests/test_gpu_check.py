"""benchmarks/gpu_check.py --dry-run --quick: every section of the GPU check runs with tiny shapes on the CPU, so that the
script a GPU session runs once (`--quick`, to fit a borrowed session) has already run end to end."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_check_runs_dry(tmp_path):
    out = tmp_path/'figures.json'
    p = subprocess.run([sys.executable, str(ROOT/'benchmarks'/'gpu_check.py'), '--dry-run', '--quick', '--json', str(out),
                        '--sections', 'env,generation,trainer,moe,selfplay'],  # seeded needs vLLM: tests/test_vllm.py runs it
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got['dry_run'] and got['quick'] and got['status'] == {s: 'ok' for s in ('env', 'generation', 'trainer', 'moe', 'selfplay')}, got['status']
    f = got['figures']
    assert f['generation']['tokens_per_s'] > 0 and f['moe']['moe_layer_tokens_per_s'] > 0
    assert {'lora_ckpt_tokens_per_s', 'lora_nockpt_tokens_per_s', 'qlora_nf4_ckpt_tokens_per_s'} <= set(f['trainer'])
    assert 'qlora_nf4_nockpt_tokens_per_s' not in f['trainer']  # --quick: QLoRA with checkpointing only
    assert f['selfplay']['stages'] and f['selfplay']['selfplay_seconds'] > 0
    assert f['selfplay']['design_tokens_per_s'] > 0 and f['selfplay']['play_tokens_per_s'] > 0  # the iteration's generation rates
    print(p.stdout[-2500:])
