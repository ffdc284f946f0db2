"""Round four (issue 54): code that runs where it must not, scores a model can forge, and parsers that raise. Each attack
sits beside a benign twin that keeps working."""
import io
import json
import os
import shutil
import textwrap
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from spade_nb.cli import main
from spade_nb.core import ConfigError
from spade_nb.selfplay import RunConfig, RunDir, load_config, resumed_config

# ---------------------------------------------------------------------------------------------------------------------
# 1. Nothing a shared file says runs code on the user's machine


def _evil_model(folder: Path, marker: Path) -> Path:
    """A model folder whose tokenizer config names a Python file (`auto_map`) that, once imported, leaves `marker`."""
    folder.mkdir(parents=True)
    (folder/'evil_tok.py').write_text(f'open({str(marker)!r}, "w").write("imported")\n'
                                      'from transformers import PreTrainedTokenizer as EvilTokenizer\n')
    (folder/'tokenizer_config.json').write_text(json.dumps({'tokenizer_class': 'EvilTokenizer',
                                                            'auto_map': {'AutoTokenizer': ['evil_tok.EvilTokenizer',
                                                                                           None]}}))
    (folder/'config.json').write_text(json.dumps({'model_type': 'llama', 'auto_map': {
        'AutoConfig': 'evil_tok.EvilTokenizer', 'AutoModelForCausalLM': 'evil_tok.EvilTokenizer'}}))
    return folder


def _shared_run(tmp: Path, **llm) -> Path:
    "A run directory as someone might hand it over: a config.yaml and an adapter snapshot."
    run = tmp/'shared-run'
    (run/'snapshots'/'iteration-0000').mkdir(parents=True)
    (run/'snapshots'/'iteration-0000'/'adapter_config.json').write_text('{}')
    RunConfig.from_dict({'llm': llm}).to_yaml(run/'config.yaml')
    return run


def _cli(*argv) -> tuple[int, str]:
    err, out = io.StringIO(), io.StringIO()
    with redirect_stderr(err), redirect_stdout(out): code = main(list(argv))
    return code, err.getvalue() + out.getvalue()


@pytest.fixture
def modules_cache(tmp_path, monkeypatch):
    "transformers copies remote code into HF_MODULES_CACHE: keep it in the test's folder."
    monkeypatch.setenv('HF_MODULES_CACHE', str(tmp_path/'hf-modules'))
    return tmp_path


def test_eval_run_refuses_remote_code_from_a_run_directory(modules_cache):
    tmp = modules_cache
    marker = tmp/'imported'
    run = _shared_run(tmp, model=str(_evil_model(tmp/'model', marker)), trust_remote_code=True)
    code, text = _cli('eval', '--run', str(run), '--suite', 'rg', '--limit', '1')
    assert code == 2 and not marker.exists(), text
    assert 'llm.trust_remote_code' in text and 'only the command line may' in text and len(text.splitlines()) == 1
    # the twin: the same switch on this command line is honoured (the model's file is imported, as the user asked)
    code, text = _cli('eval', '--run', str(run), '--suite', 'rg', '--limit', '1', '--trust-remote-code')
    assert marker.exists(), text


@pytest.mark.parametrize('section', [
    {'llm': {'trust_remote_code': True}},
    {'llm': {'engine': {'args': {'worker_extension_cls': 'evil_tok.Ext'}}}},
    {'llm': {'engine': {'args': {'trust_remote_code': True}}}},
    {'llm': {'engine': {'args': {'logits_processors': ['evil_tok.Proc']}}}},
    {'llm': {'engine': {'args': {'hf_overrides': {'auto_map': {}}}}}},
    {'admission': {'limits': {'allow_weak': True}}},
])
def test_resume_refuses_code_switches_a_run_directory_asks_for(tmp_path, section):
    run = tmp_path/'run'
    run.mkdir()
    RunConfig.from_dict(section).to_yaml(run/'config.yaml')
    before = (run/'config.yaml').read_text()
    with pytest.raises(ConfigError, match='only the command line may'):
        resumed_config(RunDir(run))
    with pytest.raises(ConfigError, match='only the command line may'):  # nor where it generates changes it
        resumed_config(RunDir(run), ['llm.engine.timeout=30'])
    assert (run/'config.yaml').read_text() == before  # nothing written
    code, text = _cli('selfplay', '--resume', str(run))
    assert code == 2 and 'only the command line may' in text, text
    code, text = _cli('launch', '--resume', str(run), '--dry-run', '--gpus', '0')
    assert code == 2 and 'only the command line may' in text, text
    # the twin: the resuming command line names the switch again, and it is honoured
    key = next(iter(['llm.trust_remote_code'] if 'trust_remote_code' in section.get('llm', {}) else
                    ['llm.engine.args'] if 'llm' in section else ['admission.limits.allow_weak']))
    value = json.dumps(section['llm']['engine']['args']) if key == 'llm.engine.args' else 'true'
    cfg = resumed_config(RunDir(run), [f'{key}={value}'], write=False)
    assert cfg.to_dict() == RunConfig.from_dict(section).to_dict()


def test_benign_run_directory_resumes_and_evaluates_as_before(tmp_path):
    run = _shared_run(tmp_path, model='embedded')
    cfg = resumed_config(RunDir(run), ['llm.engine.timeout=30'])
    assert cfg.llm.engine.timeout == 30 and RunConfig.from_yaml(run/'config.yaml').llm.engine.timeout == 30
    data = RunConfig.from_dict({'llm': {'engine': {'args': {'quantization': 'bitsandbytes', 'max_num_seqs': 8}}}})
    data.to_yaml(run/'config.yaml')
    assert resumed_config(RunDir(run)).llm.engine.args == {'quantization': 'bitsandbytes', 'max_num_seqs': 8}


def test_a_preset_file_cannot_switch_code_on(tmp_path, monkeypatch):
    import spade_nb.selfplay as sp
    for p in sp.list_presets(): shutil.copy(sp.presets_dir()/f'{p}.yaml', tmp_path)
    (tmp_path/'planted.yaml').write_text('llm:\n  trust_remote_code: true\n')
    monkeypatch.setattr(sp, 'presets_dir', lambda: tmp_path)
    with pytest.raises(ConfigError, match='llm.trust_remote_code: preset .*planted.yaml asks for it'):
        load_config('planted')
    # the twin: the user's own --config file may
    mine = tmp_path/'mine.yaml'
    mine.write_text('llm:\n  trust_remote_code: true\n')
    assert load_config(config=mine).llm.trust_remote_code


def test_pickled_adapter_is_not_read(tmp_path):
    from spade_nb.llm import tiny_policy
    policy = tiny_policy()
    pickled = tmp_path/'pickled'
    pickled.mkdir()
    (pickled/'adapter_config.json').write_text('{}')
    (pickled/'adapter_model.bin').write_bytes(b'\x80\x04K\x01.')
    with pytest.raises(FileNotFoundError, match='adapter_model.safetensors'):
        policy.set_adapter(pickled, version=1)
    # the twin: a saved safetensors adapter loads
    from peft import LoraConfig, get_peft_model
    saved = tmp_path/'saved'
    get_peft_model(tiny_policy().model, LoraConfig(r=2, target_modules=['q_proj'])).save_pretrained(saved)
    policy.set_adapter(saved, version=1)
    assert policy.adapter_version == 1
