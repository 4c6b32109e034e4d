"""What `loader eval` evaluates: BEIR folders and questions files read into an ``EvalTask``."""

from __future__ import annotations

import json
import logging
import shutil
import time

import pytest

from loader.errors import ConfigError, InputError
from loader.eval.tasks import load_task
from tests.paths import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "eval"


def test_load_task_beir_keeps_the_split_and_limit():
    task = load_task(FIXTURES / "tiny-beir")
    assert (task.name, task.kind, task.split, task.document_count) == (
        "tiny-beir",
        "beir",
        "test",
        5,
    )
    assert [q.id for q in task.queries] == ["q1", "q2", "q3", "q4"]
    assert task.qrels["q4"] == {"coast": 2, "keeper": 1}
    assert [d.source for d in task.documents()] == ["bees", "lava", "bread", "keeper", "coast"]
    limited = load_task(FIXTURES / "tiny-beir", limit=2)
    assert list(limited.qrels) == ["q1", "q2"]
    assert load_task(FIXTURES / "tiny-beir", split="train").qrels == {"q5": {"bees": 1}}


def test_a_questions_task_reads_each_document_once(monkeypatch):
    # The source check and the push both need the documents: reading 28 PDFs twice cost 120 s.
    from loader.ingest import readers

    reads = []
    real_read = readers._read

    def counted_read(path, *args, **kwargs):
        reads.append(path.name)
        return real_read(path, *args, **kwargs)

    monkeypatch.setattr(readers, "_read", counted_read)
    task = load_task(FIXTURES / "questions.jsonl", docs=FIXTURES / "docs")
    pushed = [item.source for item in task.documents()]
    assert sorted(reads) == sorted(pushed) == ["payments.md", "refunds.md"], reads


def test_load_task_questions_file_over_a_docs_folder():
    task = load_task(FIXTURES / "questions.jsonl", docs=FIXTURES / "docs")
    assert (task.name, task.kind, task.document_count) == ("docs", "questions", 2)
    assert [(q.id, q.source, q.heading_path) for q in task.queries] == [
        ("late", "refunds.md", ("Late deliveries",)),
        ("upi", "payments.md", ("Payments", "UPI")),
        ("photo", "refunds.md", ()),
    ]
    assert task.qrels == {
        "late": {"refunds.md": 1},
        "upi": {"payments.md": 1},
        "photo": {"refunds.md": 1},
    }
    assert sorted(d.source for d in task.documents()) == ["payments.md", "refunds.md"]


def write_questions(path, lines):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_judged_document_missing_from_the_folder_is_counted_in_one_warning(tmp_path, caplog):
    questions = write_questions(
        tmp_path / "questions.jsonl",
        [
            {"id": "typo", "question": "late refunds?", "source": "refund.md"},
            {"id": "fine", "question": "UPI?", "source": "./payments.md"},
            {"id": "late", "question": "late?", "source": "refunds.md"},
        ],
    )
    with caplog.at_level(logging.WARNING, logger="loader.eval.tasks"):
        task = load_task(questions, docs=FIXTURES / "docs")
    warning = (
        f"1 of 3 judged documents are not in the indexed corpus (tenant 'default', "
        f"{FIXTURES / 'docs'}): 'refund.md'; the questions judged on them cannot find them"
    )
    assert [record.getMessage() for record in caplog.records] == [warning]
    assert task.warnings == [warning]  # in the results file too


def test_judged_documents_mostly_missing_are_an_error_naming_the_count(tmp_path):
    # Scoring them would report a silent nDCG of 0: the figures would measure the gap.
    questions = write_questions(
        tmp_path / "questions.jsonl",
        [
            {"id": "typo", "question": "late refunds?", "source": "refund.md"},
            {"id": "case", "question": "UPI?", "source": "PAYMENTS.MD"},
            {"id": "fine", "question": "UPI?", "source": "payments.md"},
        ],
    )
    with pytest.raises(ConfigError) as raised:
        load_task(questions, docs=FIXTURES / "docs")
    assert str(raised.value) == (
        f"2 of 3 judged documents are not in the indexed corpus (tenant 'default', "
        f"{FIXTURES / 'docs'}): 'PAYMENTS.MD', 'refund.md'; is {FIXTURES / 'docs'} the folder "
        "the questions were judged on, and 'default' their tenant (--tenant)?"
    )


def two_tenants_folder(root):
    """Documents of tenants partners and acme in one folder, and one that names none."""
    root.mkdir()
    for name, tenant in (("rates", "partners"), ("terms", "partners"), ("plans", "acme")):
        text = f"---\ntenant: {tenant}\n---\n# {name.title()}\n\nAbout {name}.\n"
        (root / f"{name}.md").write_text(text, encoding="utf-8")
    (root / "shared.md").write_text("# Shared\n\nFor everyone.\n", encoding="utf-8")
    return root


def exported(tenant, *sources):
    """Lines as `loader judgments export` writes them: the tenant, and graded chunks."""
    return [
        {
            "id": f"q{number}",
            "question": f"about {source}?",
            "tenant": tenant,
            "source": source,
            "heading_path": [],
            "judgments": [
                {"chunk_id": f"c{number}", "source": source, "heading_path": [], "grade": 2}
            ],
        }  # fmt: skip
        for number, source in enumerate(sources, start=1)
    ]


def test_an_exported_set_is_its_tenants_documents_and_no_others(tmp_path, caplog):
    docs = two_tenants_folder(tmp_path / "docs")
    questions = write_questions(tmp_path / "q.jsonl", exported("partners", "rates.md", "terms.md"))
    with caplog.at_level(logging.WARNING, logger="loader.eval.tasks"):
        task = load_task(questions, docs=docs, default_tenant="eval")
    assert task.tenant == "partners"  # the file's, over the tenant setting
    # acme's document is left out, as a push for partners leaves it; the one naming no tenant
    # is partners' as a push makes it
    assert sorted(item.source for item in task.documents()) == [
        "rates.md",
        "shared.md",
        "terms.md",
    ]
    assert task.document_count == 3
    assert caplog.records == []
    # --tenant, the same tenant: the same task
    assert load_task(questions, docs=docs, tenant="partners").tenant == "partners"


def test_a_set_judged_on_another_tenants_documents_is_refused_with_the_count(tmp_path):
    docs = two_tenants_folder(tmp_path / "docs")
    questions = write_questions(tmp_path / "q.jsonl", exported("partners", "plans.md"))
    missing = (
        r"^1 of 1 judged documents are not in the indexed corpus \(tenant 'partners', .*docs\): "
        r"'plans.md' \(1 of them other tenants' documents, by their front matter\); "
    )
    with pytest.raises(ConfigError, match=missing):
        load_task(questions, docs=docs)


def test_the_tenant_comes_from_the_option_else_the_file_else_the_setting(tmp_path):
    docs = two_tenants_folder(tmp_path / "docs")
    plain = write_questions(tmp_path / "plain.jsonl", [{"question": "x?", "source": "shared.md"}])
    assert load_task(plain, docs=docs).tenant == "default"  # the tenant setting's default
    assert load_task(plain, docs=docs, default_tenant="acme").tenant == "acme"
    assert load_task(plain, docs=docs, tenant="partners", default_tenant="acme").tenant == (
        "partners"
    )
    theirs = write_questions(tmp_path / "theirs.jsonl", exported("partners", "rates.md"))
    with pytest.raises(
        ConfigError, match="its questions are of tenant 'partners' .*not of --tenant 'acme'"
    ):
        load_task(theirs, docs=docs, tenant="acme")
    mixed = write_questions(
        tmp_path / "mixed.jsonl",
        exported("partners", "rates.md") + exported("acme", "-", "plans.md")[1:],
    )
    with pytest.raises(ConfigError, match=r"of 2 tenants \('acme', 'partners'\)"):
        load_task(mixed, docs=docs)
    with pytest.raises(ConfigError, match="--tenant is only for a questions file"):
        load_task(FIXTURES / "tiny-beir", tenant="acme")


def test_a_questions_line_with_a_tenant_that_is_no_name_is_refused(tmp_path):
    docs = two_tenants_folder(tmp_path / "docs")
    bad = write_questions(
        tmp_path / "bad.jsonl", [{"question": "x?", "source": "a.md", "tenant": 3}]
    )
    with pytest.raises(InputError, match=r"bad.jsonl:1: tenant 3 must be a name"):
        load_task(bad, docs=docs)


def test_beir_judged_documents_mostly_missing_from_the_corpus_are_an_error(tmp_path):
    folder = tmp_path / "beir"
    shutil.copytree(FIXTURES / "tiny-beir", folder)
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\tbees\t1\nq2\tgone\t1\nq3\tlost\t1\nq4\tcoast\t0\n",
        encoding="utf-8",
    )
    missing = r"^2 of 3 judged documents are not in the indexed corpus \(the corpus of .*beir\): "
    with pytest.raises(ConfigError, match=missing + "'gone', 'lost'; are qrels/test.tsv"):
        load_task(folder)


def test_reading_the_documents_is_timed(monkeypatch):
    # eval's seconds include the reading: a folder of PDFs takes minutes before the push.
    from loader.ingest import readers

    real_read = readers._read

    def slow_read(path, *args, **kwargs):
        time.sleep(0.3)
        return real_read(path, *args, **kwargs)

    monkeypatch.setattr(readers, "_read", slow_read)
    task = load_task(FIXTURES / "questions.jsonl", docs=FIXTURES / "docs")
    assert task.read_seconds >= 0.6  # two documents


def test_load_task_errors(tmp_path):
    with pytest.raises(ConfigError, match="--docs FOLDER"):
        load_task(FIXTURES / "questions.jsonl")
    with pytest.raises(ConfigError, match="--docs is only for a questions file"):
        load_task(FIXTURES / "tiny-beir", docs=FIXTURES / "docs")
    with pytest.raises(InputError, match="neither a BEIR folder nor a questions file"):
        load_task(tmp_path / "missing")
    with pytest.raises(ConfigError, match="nowhere is not a folder"):
        load_task(FIXTURES / "questions.jsonl", docs=tmp_path / "nowhere")


def test_a_question_on_a_file_in_an_unreadable_folder_is_left_to_the_push(
    tmp_path, caplog, monkeypatch
):
    from loader.ingest import readers

    docs = tmp_path / "docs"
    (docs / "locked").mkdir(parents=True)
    (docs / "locked" / "inner.md").write_text("# Inner\n\nText.\n", encoding="utf-8")
    (docs / "open.md").write_text("# Open\n\nText.\n", encoding="utf-8")
    real_children = readers._children

    def children(folder):
        if folder.name == "locked":
            raise PermissionError(13, "Permission denied", str(folder))
        return real_children(folder)

    monkeypatch.setattr(readers, "_children", children)
    questions = write_questions(
        tmp_path / "questions.jsonl",
        [
            {"id": "inner", "question": "inner?", "source": "locked/inner.md"},
            {"id": "open", "question": "open?", "source": "open.md"},
        ],
    )
    with caplog.at_level(logging.WARNING, logger="loader.eval.tasks"):
        load_task(questions, docs=docs)
    assert caplog.records == []  # the push names the folder; "no document" would be wrong
