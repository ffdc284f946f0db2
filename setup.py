"Packaging for spade_nb: everything is read from settings.ini, the nbdev source of truth."
from configparser import ConfigParser
from pathlib import Path
import setuptools

cfg = ConfigParser(delimiters=['='])
cfg.read('settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']
for key in 'lib_name version description author author_email license min_python'.split():
    assert key in cfg, f'settings.ini lacks the key {key!r}'

def reqs(key): return cfg.get(key, '').split()

statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive']
py_versions = ['3.10', '3.11', '3.12']
min_python = cfg['min_python']

setuptools.setup(
    name=cfg['lib_name'],
    version=cfg['version'],
    description=cfg['description'],
    long_description=Path('README.md').read_text(encoding='utf-8'),
    long_description_content_type='text/markdown',
    author=cfg['author'],
    author_email=cfg['author_email'],
    license='MIT',
    url=cfg['git_url'],
    keywords=cfg.get('keywords', '').split(),
    classifiers=[
        'Development Status :: ' + statuses[int(cfg['status'])],
        'Intended Audience :: ' + cfg['audience'],
        'Natural Language :: ' + cfg['language'],
        'Topic :: Scientific/Engineering :: Artificial Intelligence',
    ] + ['Programming Language :: Python :: ' + v for v in py_versions[py_versions.index(min_python):]],
    packages=setuptools.find_packages(include=['spade_nb', 'spade_nb.*']) + ['spade_nb.configs'],
    package_dir={'spade_nb.configs': 'configs'},  # the presets ship inside the package as spade_nb/configs
    include_package_data=True,
    package_data={'spade_nb.configs': ['*.yaml', 'models/*.yaml', 'accelerate/*.yaml'], 'spade_nb': ['data/qwen3/*']},  # Qwen3's tokenizer, for offline tests
    python_requires='>=' + min_python,
    install_requires=reqs('requirements'),
    extras_require={'dev': reqs('dev_requirements'), 'vllm': reqs('vllm_requirements'), 'eval': reqs('eval_requirements'),
                    'tracking': reqs('tracking_requirements')},
    entry_points={'console_scripts': cfg.get('console_scripts', '').split(),
                  'nbdev': [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"]},
    zip_safe=False,
)
