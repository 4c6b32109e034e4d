"""The cluster's (major, minor) read from a ``GET /`` answer: what apply and doctor render the
pipelines for (a 2.x node has no z-score)."""

from __future__ import annotations

import pytest

from loader.cluster.client import version_of


@pytest.mark.parametrize(
    ("banner", "version"),
    [
        ({"version": {"number": "3.6.0"}}, (3, 6)),
        ({"version": {"number": "2.19.1"}}, (2, 19)),
        ({"version": {"number": "3.0.0-SNAPSHOT"}}, (3, 0)),
        ({"version": {"number": "3"}}, None),
        ({"version": {"number": "x.y.z"}}, None),
        ({"version": "3.6.0"}, None),
        ({}, None),
        ("<html>a proxy's page</html>", None),
    ],
)
def test_the_version_is_read_from_the_banner_or_is_none(banner, version):
    assert version_of(banner) == version
