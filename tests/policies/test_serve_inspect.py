"""Inspect AI's OpenAI-compatible provider against ``arlkit serve``: three epochs of an inline task
are three different samples, and ``num_choices=3`` returns three choices."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

inspect_ai = pytest.importorskip("inspect_ai")

from arlkit.policies import SamplingConfig  # noqa: E402
from arlkit.policies.serve import OpenAICompatibleServer  # noqa: E402

from .conftest import make_hf  # noqa: E402


@pytest.fixture(scope="module")
def server(spiky) -> Iterator[OpenAICompatibleServer]:  # type: ignore[no-untyped-def]
    with OpenAICompatibleServer(make_hf(spiky, sampling=SamplingConfig(temperature=1.0, max_new_tokens=8)), "tiny") as srv:
        yield srv


def _run(server: OpenAICompatibleServer, log_dir: Path, monkeypatch: pytest.MonkeyPatch, **options: object):  # type: ignore[no-untyped-def]
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    monkeypatch.setenv("ARLKIT_API_KEY", "unused")  # Inspect reads <SERVICE>_API_KEY for openai-api/<service>/...
    task = Task(dataset=[Sample(input=f"Where do you go from cell {i}?", target="Down") for i in range(3)],
                solver=[generate()], scorer=includes())
    [log] = inspect_eval(task, model="openai-api/arlkit/tiny", model_base_url=server.base_url, log_dir=str(log_dir),
                         display="none", temperature=1.0, max_tokens=8, **options)
    assert log.status == "success", log.error
    return log


def test_three_epochs_are_three_samples(server: OpenAICompatibleServer, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    log = _run(server, tmp_path, monkeypatch, epochs=3)
    by_sample: dict[object, list[str]] = {}
    for sample in log.samples:
        by_sample.setdefault(sample.id, []).append(sample.output.completion)
    assert len(by_sample) == 3 and all(len(v) == 3 for v in by_sample.values())
    assert all(len(set(v)) > 1 for v in by_sample.values())  # unseeded requests are fresh samples


def test_num_choices_gives_three_choices(server: OpenAICompatibleServer, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    log = _run(server, tmp_path, monkeypatch, num_choices=3)
    for sample in log.samples:
        texts = [choice.message.text for choice in sample.output.choices]
        assert len(texts) == 3 and len(set(texts)) > 1
