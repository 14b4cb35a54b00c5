"""The README's worked example, offline: scripts/example_user_data.py writes Markdown pages and a QA file
from ClapNQ; ingested with the hashing embedder they go through `data check` and `data derive` (compile and
eval on the result are covered with scripted LMs in tests/cli/test_data_own.py)."""

import importlib.util
import json

import pytest
from typer.testing import CliRunner

from selfrag import paths
from selfrag.cli.app import app

DATASETS = paths.datasets_dir()
SCRIPT = paths.source_root() / "scripts" / "example_user_data.py"
runner = CliRunner()


def example_module():
    spec = importlib.util.spec_from_file_location("example_user_data", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_page_names_are_stable_and_distinct():
    m = example_module()
    assert m.page_name("Prime Minister of Canada") == "prime-minister-of-canada-24507b.md"  # the same on every run
    assert m.page_name("A/B") != m.page_name("A B") and m.page_name("???").startswith("page-")


def test_a_missing_datasets_folder_is_one_line(tmp_path, capsys):
    assert example_module().main(["--out", str(tmp_path / "x"), "--datasets", str(tmp_path)]) == 2
    assert "no ClapNQ data" in capsys.readouterr().err and not (tmp_path / "x").exists()


@pytest.mark.skipif(not (DATASETS / "clapnq").is_dir(), reason="shared datasets not present")
def test_the_worked_example_checks_and_derives(tmp_path, monkeypatch):
    monkeypatch.setenv("SELFRAG_KB__EMBEDDING_MODEL", "hash")
    monkeypatch.setenv("SELFRAG_KB__PATH", str(tmp_path / "kb"))
    monkeypatch.chdir(tmp_path)
    counts = example_module().build(DATASETS, tmp_path / "cu", limit=8)
    assert counts == {"pages": len(list((tmp_path / "cu" / "docs").glob("*.md"))), "questions": 16, "answerable": 8}
    rows = [json.loads(line) for line in (tmp_path / "cu" / "qa.jsonl").read_text().splitlines()]
    assert all((tmp_path / "cu" / "docs" / r["gold_sources"][0]).is_file() for r in rows if r["answers"])
    page = (tmp_path / "cu" / "docs" / rows[0]["gold_sources"][0]).read_text()
    assert page.startswith("# ")

    ingest = runner.invoke(app, ["ingest", str(tmp_path / "cu" / "docs"), "--collection", "clapnq-user", "-q"])
    assert ingest.exit_code == 0, ingest.output
    check = runner.invoke(app, ["data", "check", "cu/qa.jsonl"])
    assert check.exit_code == 0 and "16 usable (8 answerable, 8 unanswerable, 8 with gold documents)" in " ".join(
        check.output.split())
    derive = runner.invoke(app, ["data", "derive", "cu/qa.jsonl", "--collection", "clapnq-user", "--out", "cu/derived"])
    assert derive.exit_code == 0, derive.output
    manifest = json.loads((tmp_path / "cu" / "derived" / "manifest.json").read_text())
    assert manifest["skipped"] == [] and manifest["provenance"]["relevance"]["gold_doc"] == 8
    counts = manifest["counts"]
    assert sum(counts["qa"]["dev"].values()) >= 1 and sum(counts["qa"]["train"].values()) >= 1
    assert sum(counts["support"]["train"].values()) + sum(counts["support"]["dev"].values()) >= 16


def test_chinese_titles_keep_their_characters_in_the_page_name():
    m = example_module()
    name = m.page_name("北京大学")
    assert name.startswith("北京大学-") and name.endswith(".md") and name != m.page_name("北京 大学")


def test_a_missing_cmrc_folder_is_one_line(tmp_path, capsys):
    (tmp_path / "clapnq").mkdir()
    assert example_module().main(["--out", str(tmp_path / "x"), "--datasets", str(tmp_path), "--language", "zh"]) == 2
    assert "no CMRC 2018 data" in capsys.readouterr().err and not (tmp_path / "x").exists()


@pytest.mark.skipif(not (DATASETS / "cmrc2018").is_dir(), reason="shared datasets not present")
def test_the_chinese_example_holds_no_unanswerable_questions_page(tmp_path):
    from optimize.records_zh import held_out
    from optimize.sources import read_cmrc

    counts = example_module().build_zh(DATASETS, tmp_path / "cz", limit=6)
    assert counts["questions"] == 12 and counts["answerable"] == 6
    rows = [json.loads(line) for line in (tmp_path / "cz" / "qa.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(r["language"] == "zh" and r["question"].strip() for r in rows)
    pages = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "cz" / "docs").glob("*.md")}
    for r in rows:
        if r["answers"]:  # its gold page exists and states the answer
            assert any(a in pages[r["gold_sources"][0]] for a in r["answers"])
    paragraphs = read_cmrc(DATASETS)
    by_id = {f"cmrc:{qa['id']}": p for p in paragraphs for qa in p.qas}
    unanswerable = [by_id[r["id"]] for r in rows if not r["answers"]]
    assert len(unanswerable) == 6 and all(held_out(p.doc_id) for p in unanswerable)
    text = "\n".join(pages.values())  # no page holds a held-out paragraph (nor, for these questions, their answers)
    assert not any(p.text.strip() in text for p in unanswerable)
    spans = {f"cmrc:{qa['id']}": [a["text"].strip() for a in qa["answers"]] for p in paragraphs for qa in p.qas}
    assert all(spans[r["id"]] and not any(a in text for a in spans[r["id"]]) for r in rows if not r["answers"])
