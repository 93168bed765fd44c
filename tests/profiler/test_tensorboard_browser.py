"""The profile opened the way a user opens it: TensorBoard with its profile plugin, in a real
headless Chromium, shows the XPU's lane (the /device:GPU:0 plane and its "compute" stream)
in the trace viewer.

Needs tensorboard, tensorboard-plugin-profile and selenium (PyPI) and chromium with
chromedriver (Debian: apt-get install chromium chromium-driver); skips naming what is
missing."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

import pluggable
from pluggable import ops, profiler

pytest.importorskip("tensorboard", reason="tensorboard is not installed "
                                          "(pip install tensorboard tensorboard-plugin-profile)")
pytest.importorskip("tensorboard_plugin_profile",
                    reason="TensorBoard's profile plugin is not installed "
                           "(pip install tensorboard-plugin-profile)")
webdriver = pytest.importorskip("selenium.webdriver",
                                reason="selenium is not installed (pip install selenium)")
from selenium.common.exceptions import WebDriverException  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("no headless Chromium (apt-get install chromium chromium-driver)",
                allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _frames_with(driver, texts, depth=0):
    """Whether some (nested) frame of the page holds every one of ``texts``."""
    if all(t in driver.page_source for t in texts):
        return True
    if depth > 4:
        return False
    for frame in driver.find_elements("tag name", "iframe"):
        driver.switch_to.frame(frame)
        try:
            if _frames_with(driver, texts, depth + 1):
                return True
        finally:
            driver.switch_to.parent_frame()
    return False


def test_tensorboard_shows_the_xpu_lane_in_the_trace_viewer(tmp_path):
    with pluggable.device("/xpu:0"):
        a = pluggable.tensor(np.ones((8, 8), np.float32))
        with profiler.Profile(tmp_path) as session:
            for _ in range(3):
                e = ops.add(ops.relu(ops.matmul(a, a)), a)
            e.numpy()
    run = os.path.basename(os.path.dirname(session.result.path))
    host = os.path.basename(session.result.path).split(".xplane.pb")[0]
    port = _free_port()
    board = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir",
                              str(tmp_path), "--host", "127.0.0.1", "--port", str(port)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1600,1000"):
        options.add_argument(argument)
    driver = None
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugins_listing",
                                       timeout=2)
                break
            except OSError:
                assert board.poll() is None, board.stderr.read().decode()[-2000:]
                assert time.monotonic() < deadline, "TensorBoard did not start in 60 s"
                time.sleep(0.5)
        driver = webdriver.Chrome(service=webdriver.ChromeService(CHROMEDRIVER),
                                  options=options)
        driver.get(f"http://127.0.0.1:{port}/?run={run}&tag=trace_viewer&host={host}")
        deadline = time.monotonic() + 90
        trouble = None  # the last error met walking the frames of a page still being built
        while True:
            try:
                if _frames_with(driver, ("/device:GPU:0", "compute", "/host:CPU")):
                    break
            except WebDriverException as e:  # a frame replaced or detached while it is read
                trouble = e.msg
            assert time.monotonic() < deadline, \
                ("the trace viewer showed no /device:GPU:0 lane with its compute stream in "
                 f"90 s (last error reading the page: {trouble})")
            time.sleep(2)
            driver.switch_to.default_content()
    finally:
        if driver is not None:
            driver.quit()
        board.terminate()
        board.wait(timeout=30)
