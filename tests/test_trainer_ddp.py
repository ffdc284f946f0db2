"""The trainer runs unchanged under `accelerate launch`: two CPU processes (gloo) give the same update as one.

`accelerate launch --multi_gpu --num_processes 2` starts data-parallel processes; on a machine without
GPUs accelerate uses the gloo backend on CPU. Each process trains on half of the samples; since every
process normalises by the whole batch's counts and gradients are summed, both end with exactly the
weights a single process gets from the whole batch.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from spade_nb.core import Sample
from spade_nb.llm import tiny_policy
from spade_nb.trainer import Trainer, TrainerConfig

CFG = dict(lr=1e-2, loss_agg='seq_mean', micro_batch_tokens=64, seed=5)


def make_samples():
    rng = np.random.default_rng(0)
    out = []
    for i in range(8):
        L = int(rng.integers(8, 16)); ids = rng.integers(3, 1000, L).tolist()
        mask = [0] * 3 + [int(x) for x in rng.integers(0, 2, L - 3)]
        out.append(Sample(ids, mask, [float(x) * m for x, m in zip(-rng.random(L), mask)], 'agent', float(i % 2),
                          group=f'g{i % 4}', advantage=float(rng.normal())))
    return out


def lora_state(trainer):
    return {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}


SCRIPT = '''
import sys
sys.path.insert(0, {tests!r})
from accelerate import Accelerator
acc = Accelerator(cpu=True)
from safetensors.torch import save_file
from test_trainer_ddp import CFG, lora_state, make_samples
from spade_nb.llm import tiny_policy
from spade_nb.trainer import Trainer, TrainerConfig
assert acc.num_processes == 2
tr = Trainer(tiny_policy(seed=1), TrainerConfig(**CFG))
shard = make_samples()[acc.process_index::2]
for _ in range(2): tr.train_step(shard)
save_file(lora_state(tr), {out!r} + f'/rank{{acc.process_index}}.safetensors')
'''


def test_two_cpu_processes_match_one(tmp_path):
    script = tmp_path/'train.py'
    script.write_text(SCRIPT.format(tests=str(Path(__file__).parent), out=str(tmp_path)))
    accelerate = shutil.which('accelerate') or str(Path(sys.executable).parent/'accelerate')
    r = subprocess.run([accelerate, 'launch', '--multi_gpu', '--num_processes', '2', '--num_machines', '1',
                        '--mixed_precision', 'no', '--dynamo_backend', 'no', str(script)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    single = Trainer(tiny_policy(seed=1), TrainerConfig(**CFG))
    before = lora_state(single)
    for _ in range(2): single.train_step(make_samples())
    want = lora_state(single)
    ranks = [load_file(tmp_path/f'rank{k}.safetensors') for k in (0, 1)]
    for name, w in want.items():
        assert torch.allclose(ranks[0][name], ranks[1][name], atol=0, rtol=0), name  # the processes agree exactly
        assert torch.allclose(ranks[0][name], w, atol=1e-6, rtol=1e-4), name  # and match one process on the whole batch
    assert any(not torch.equal(want[n], before[n]) for n in want)  # the update did something
