"""A page object for flowray's web UI in a Selenium-driven browser: open a job's page,
switch tabs, wait for what the page shows (the page refreshes itself every 2 s), save a
screenshot of a tab."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, TypeVar

__all__ = ["WebUIPage"]

T = TypeVar("T")


#: how often a read is tried again when the page re-rendered under it
STALE_RETRIES = 5

class WebUIPage:
    """The web UI of one job master at ``url``, in ``driver``."""

    def __init__(self, driver, url: str, timeout_s: float = 90.0) -> None:
        self.driver = driver
        self.url = url
        self.timeout_s = timeout_s

    def open(self) -> "WebUIPage":
        self.driver.get(self.url + "/")
        self.wait_for(lambda d: d.find_elements("css selector", "#job-list .job-row"),
                      "the job list")
        return self

    def wait_for(self, condition: Callable[[object], T], what: str) -> T:
        """Poll the page until ``condition(driver)`` is truthy; fail naming ``what``."""
        from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait

        def safe(driver):
            try:   # the page replaces its elements on each refresh
                return condition(driver)
            except StaleElementReferenceException:
                return False
        try:
            return WebDriverWait(self.driver, self.timeout_s, poll_frequency=0.2).until(safe)
        except TimeoutException:
            raise AssertionError(f"the web UI did not show {what} within {self.timeout_s:.0f} s;"
                                 f" the page says: {self.text()[:1500]}") from None

    def show_tab(self, tab: str) -> None:
        def clicked(driver) -> bool:
            # the page re-renders every 2 s: a link found just before may be replaced
            driver.find_element("css selector", f'#tabs a[data-tab="{tab}"]').click()
            return True
        self.wait_for(clicked, f"the {tab} tab's link")
        self.wait_for(lambda d: d.find_elements("css selector", f"#tab-{tab}"),
                      f"the {tab} tab")

    def texts(self, selector: str) -> List[str]:
        return self._read(selector, lambda e: e.text)

    def attribute_of(self, selector: str, name: str) -> List[str]:
        return self._read(selector, lambda e: e.get_attribute(name))

    def _read(self, selector: str, value) -> List[str]:
        """``value`` of each element ``selector`` finds; found again when the page
        re-rendered (every 2 s) between finding the elements and reading them."""
        from selenium.common.exceptions import StaleElementReferenceException
        for _ in range(STALE_RETRIES):
            try:
                return [value(e) for e in self.driver.find_elements("css selector", selector)]
            except StaleElementReferenceException:
                continue
        return [value(e) for e in self.driver.find_elements("css selector", selector)]

    def text(self) -> str:
        return self.driver.find_element("css selector", "body").text

    def screenshot(self, folder: Path, name: str) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path
