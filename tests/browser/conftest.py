"""One headless Debian Chromium per test run, driven by Selenium through Debian's
ChromeDriver (``make chromium`` installs both; no browser is downloaded)."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = os.environ.get("FLOWRAY_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("FLOWRAY_CHROMEDRIVER", "/usr/bin/chromedriver")


@pytest.fixture(scope="session")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    if missing:
        pytest.fail(f"the browser tests need Debian's chromium and chromium-driver; missing: "
                    f"{', '.join(missing)} (run `make chromium`)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1400,900", "--disable-gpu"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()
