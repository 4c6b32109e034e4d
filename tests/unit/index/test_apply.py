"""apply's control flow where no cluster can make it happen on cue: Ctrl-C during a reindex."""

from __future__ import annotations

import pytest

from loader.index import apply


class ReindexingClient:
    """Starts a reindex task and reports it running until the second poll is interrupted."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.polls = 0
        self.tasks = self
        self.indices = self

    def refresh(self, index: str) -> dict:
        return {}

    def reindex(self, **_: object) -> dict:
        return {"task": "node:42"}

    def get(self, task_id: str) -> dict:
        self.polls += 1
        if self.polls == 2:
            raise KeyboardInterrupt  # what Ctrl-C raises in the waiting loop
        return {"completed": False}

    def cancel(self, task_id: str) -> dict:
        self.cancelled.append(task_id)
        return {}


def test_an_interrupted_reindex_cancels_its_task(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apply, "REINDEX_POLL_SECONDS", 0)
    client = ReindexingClient()
    with pytest.raises(KeyboardInterrupt):
        apply._reindex(client, "kb-v1", "kb-v2")  # type: ignore[arg-type]
    assert client.cancelled == ["node:42"]  # else it goes on filling kb-v2, which nothing uses
