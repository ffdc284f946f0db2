"""EnvPlayer in a real browser against a live kernel: Voila serves a notebook that shows an EnvPlayer on loopback,
Debian's Chromium (headless, driven by Selenium through Debian's chromedriver: no driver download) types an action,
and the observation shown in the page changes. CI installs all of it (`.ci/run`) and sets SPADE_NB_REQUIRE, so there
a missing piece fails this test; elsewhere it skips. SPADE_NB_SCREENSHOT=path saves the page (README's picture)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import require

CHROMIUM, CHROMEDRIVER = '/usr/bin/chromium', '/usr/bin/chromedriver'
NOTEBOOK = {'cells': [{'cell_type': 'code', 'execution_count': None, 'id': 'play', 'metadata': {}, 'outputs': [],
                       'source': "from spade_nb.widgets import EnvPlayer\nEnvPlayer('CodeBreakerEnv', seed=3)"}],
            'metadata': {'kernelspec': {'display_name': 'Python 3', 'language': 'python', 'name': 'python3'}},
            'nbformat': 4, 'nbformat_minor': 5}


def _require_binary(path: str):
    if Path(path).is_file(): return
    if 'chromium' in os.environ.get('SPADE_NB_REQUIRE', '').replace(',', ' ').split():
        pytest.fail(f'{path} is required here (SPADE_NB_REQUIRE) but missing: apt-get install chromium chromium-driver')
    pytest.skip(f'{path} is not installed')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]


@pytest.fixture
def voila(tmp_path):
    "A Voila server on loopback showing NOTEBOOK; its URL."
    require('voila')
    nb = tmp_path/'player.ipynb'
    nb.write_text(json.dumps(NOTEBOOK))
    port, log = _free_port(), open(tmp_path/'voila.log', 'w')
    proc = subprocess.Popen([sys.executable, '-m', 'voila', str(nb), '--no-browser', f'--port={port}', '--Voila.ip=127.0.0.1',
                             '--Voila.tornado_settings={"disable_check_xsrf": True}'],
                            stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, env={**os.environ, 'PYTHONUNBUFFERED': '1'})
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if proc.poll() is not None: pytest.fail(f'voila exited with {proc.returncode}: {(tmp_path/"voila.log").read_text()[-2000:]}')
            try:
                socket.create_connection(('127.0.0.1', port), timeout=1).close(); break
            except OSError: time.sleep(0.5)
        else: pytest.fail(f'voila did not listen within 120 s: {(tmp_path/"voila.log").read_text()[-2000:]}')
        yield f'http://127.0.0.1:{port}/'
    finally:
        proc.terminate()
        try: proc.wait(timeout=20)
        except subprocess.TimeoutExpired: proc.kill()
        log.close()


@pytest.fixture
def chrome(tmp_path):
    require('selenium')
    _require_binary(CHROMIUM); _require_binary(CHROMEDRIVER)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-quic', '--no-first-run',
              '--disable-background-networking', '--disable-component-update', '--disable-sync', '--window-size=1000,480',
              f'--user-data-dir={tmp_path/"chromium-profile"}'):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try: yield driver
    finally: driver.quit()


def test_envplayer_in_a_real_browser(voila, chrome, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait
    chrome.get(voila)
    box = WebDriverWait(chrome, 180).until(EC.element_to_be_clickable((By.CSS_SELECTOR, '.spade-action input')))
    transcript = chrome.find_element(By.CSS_SELECTOR, '.spade-transcript')
    before = transcript.text
    assert 'turn 0/' in chrome.find_element(By.CSS_SELECTOR, '.spade-status').text and before.strip()
    box.click(); box.send_keys('1111')
    chrome.find_element(By.CSS_SELECTOR, '.spade-send').click()
    WebDriverWait(chrome, 60).until(lambda d: d.find_element(By.CSS_SELECTOR, '.spade-transcript').text != before)
    after = chrome.find_element(By.CSS_SELECTOR, '.spade-transcript').text
    assert after.startswith(before.strip()[:20]) and 'you: 1111' in after and 'reward' in after  # the kernel stepped the sandbox
    WebDriverWait(chrome, 30).until(lambda d: 'turn 1/' in d.find_element(By.CSS_SELECTOR, '.spade-status').text)
    shot = tmp_path/'envplayer.png'
    assert chrome.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    if os.environ.get('SPADE_NB_SCREENSHOT'): shutil.copy(shot, os.environ['SPADE_NB_SCREENSHOT'])
