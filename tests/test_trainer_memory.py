"""A training step's memory, measured on a CPU against `spade_nb.trainer.step_memory`, and the step that used to need 14 GB.

Each case trains a random model of a small shape in a fresh process (`measure_step_in_subprocess`: the allocator returns
freed memory, so the resident set follows the tensors) and measures the second step's peak above the resting process."""
import pytest

CASES = {  # name -> spec of measure_step
    'llama, LoRA on attention and MLP, AdamW 8-bit': dict(arch='llama', hidden=256, intermediate=768, layers=4, rows=2, length=1024,
        trainer=dict(logp_chunk_mb=16, optimizer='adamw8bit',
                     target_modules=['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'])),
    'llama QLoRA (NF4), gradient checkpointing': dict(arch='llama', hidden=384, intermediate=1152, layers=4, rows=2, length=1024,
        quantization='nf4', trainer=dict(logp_chunk_mb=16, gradient_checkpointing=True)),
    'qwen3 (QK-norm), its vocabulary': dict(arch='qwen3', hidden=256, intermediate=768, layers=4, rows=2, length=512,
        trainer=dict(logp_chunk_mb=16), warmup=False),  # the first step: its optimizer state (LoRA on attention) is about 1 MB
}


@pytest.mark.parametrize('name', list(CASES))
def test_step_memory_models_the_measured_peak(name):
    from spade_nb.testing import measure_step_in_subprocess
    from spade_nb.trainer import ModelDims, TrainerConfig, step_memory
    got = measure_step_in_subprocess(CASES[name])
    est = step_memory(ModelDims(**got['dims']), TrainerConfig(**got['trainer']))
    ratio = est['step_peak'] / got['peak']
    print(f"{name}: measured {got['peak'] / 2**20:.0f} MiB, modelled {est['step_peak'] / 2**20:.0f} MiB (ratio {ratio:.2f})")
    assert got['peak'] > 50 * 2**20  # a step that measures something
    assert abs(ratio - 1) < 0.25, (name, got['peak'], est)


def test_8192_tokens_with_qwen3s_vocabulary_stay_below_2_gb():
    "One step on 2 x 4096 tokens of a one-layer Qwen3 (151,669 tokens): about 14 GB above resting with full logits."
    from spade_nb.testing import measure_step_in_subprocess
    from spade_nb.trainer import ModelDims, TrainerConfig, step_memory
    got = measure_step_in_subprocess(dict(arch='qwen3', hidden=64, intermediate=128, layers=1, rows=2, length=4096, warmup=False))
    est = step_memory(ModelDims(**got['dims']), TrainerConfig(**got['trainer']))
    print(f"8192 tokens, Qwen3's vocabulary: step peak {got['peak'] / 2**30:.2f} GiB above resting, modelled {est['step_peak'] / 2**30:.2f} GiB")
    assert got['dims']['vocab'] == 151_669 and got['trainer']['micro_batch_tokens'] == 8192
    assert got['peak'] < 2 * 2**30
    assert abs(est['step_peak'] / got['peak'] - 1) < 0.25
