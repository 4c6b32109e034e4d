"""Importing on the judging page in Debian's headless Chromium: a file with a bad row is refused
and the page shows the server's message naming its line; a Quepid CSV on the 0-3 scale, chosen
in the file input, is imported (import.js sends it with the page's token), the page links the
new set and the list of sets shows it; the grades stored are the CSV's.

Reuses the index of ``test_judging_snapshots`` (its fixture and helpers) and the browser of
``test_judging_browser``.
"""

from __future__ import annotations

import pytest

from loader.errors import NotFoundError
from loader.query.judgments import find_query_set, judging_state
from loader.serve.app import create_app
from tests.integration.serve.http_server import Server
from tests.integration.serve.test_judging_browser import (  # noqa: F401 (fixtures)
    _sign_in,
    _wait,
    browser,
)
from tests.integration.serve.test_judging_snapshots import (  # noqa: F401 (fixtures)
    KEY_A,
    QUESTIONS,
    _chunk_of,
    harbour,
)

pytestmark = pytest.mark.integration

from selenium.webdriver.common.by import By  # noqa: E402


def _import(driver, path, name: str, scale: str) -> None:
    driver.find_element(By.ID, "import-file").send_keys(str(path))
    box = driver.find_element(By.ID, "import-name")
    box.clear()
    box.send_keys(name)
    rating = driver.find_element(By.ID, "import-scale")
    rating.clear()
    rating.send_keys(scale)
    driver.find_element(By.ID, "import-button").click()


def test_a_quepid_csv_chosen_on_the_page_is_imported_and_listed(
    harbour,  # noqa: F811
    browser,  # noqa: F811
    client,
    embedder,
    tmp_path,
):
    settings, _ = harbour
    alias = settings.index_name
    timetable = _chunk_of(client, alias, "A", "timetable.md")
    parking = _chunk_of(client, alias, "A", "parking.md")
    ratings = tmp_path / "quepid ratings.csv"
    ratings.write_text(
        f"query,docid,rating\n{QUESTIONS[0]},{timetable},3\n{QUESTIONS[1]},{parking},1\n",
        encoding="utf-8",
    )
    bad = tmp_path / "bad.csv"
    bad.write_text(f"query,docid,rating\n{QUESTIONS[0]},{timetable},9\n", encoding="utf-8")
    with Server(create_app(settings, embedder=embedder)) as server:
        _sign_in(browser, server, KEY_A)
        status = browser.find_element(By.ID, "import-status")
        _import(browser, bad, "from the page", "3")
        _wait(browser, lambda d: status.text.startswith("not imported: "))
        assert "judgments file bad.csv: line 2: rating '9'" in status.text
        with pytest.raises(NotFoundError):
            find_query_set(client, alias, "A", "from the page")

        _import(browser, ratings, "from the page", "3")
        link = _wait(browser, lambda d: d.find_elements(By.ID, "imported-set"))[0]
        assert link.text == "from the page"
        assert "2 questions, 2 grades (quepid-csv)" in status.text
        listed = (By.CSS_SELECTOR, "ul.sets .set-link")  # the list, read again
        _wait(browser, lambda d: "from the page" in [a.text for a in d.find_elements(*listed)])
        query_set = find_query_set(client, alias, "A", "from the page")
        assert link.get_attribute("href").endswith(f"/judge/sets/{query_set.set_id}")
        state = judging_state(client, alias, "A", query_set.set_id)
        stored = {n: {c: g.grade for c, g in by.items()} for n, by in state.grades.items()}
        assert stored == {0: {timetable: 2}, 1: {parking: 1}}  # 3 -> 2, 1 -> 1 on 0-2
