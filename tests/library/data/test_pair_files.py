"""Tests of attn_course.data.tatoeba's pair files: the other language named from the file, a hash of the
content, and which file is the shipped sample."""

from __future__ import annotations

import shutil
import zipfile

import pytest

from attn_course.data import tatoeba

SPANISH = "Go.\tVe.\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM) & #4986655 (cueyayotl)\n" \
          "Hi.\tHola.\n"


@pytest.mark.parametrize(("name", "language"), [
    ("spa-eng.zip", "Spanish"), ("spa.txt", "Spanish"), ("fra-eng.txt.xz", "French"), ("deu.txt", "German"),
    ("cmn-eng.txt", "Mandarin Chinese"), ("deu-eng/pairs.txt", "German"),
    ("nob-eng/nob.txt", "Norwegian Bokmål"),
    ("pairs.txt", None), ("eng.txt", None), ("spanish.txt", None), ("cat_pictures.txt", None),
])
def test_language_of_reads_the_iso_code_a_manythings_name_starts_with(name, language):
    assert tatoeba.language_of(name) == language


def test_language_of_looks_inside_a_zip_whose_name_does_not_say(tmp_path):
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("_about.txt", "about")
        out.writestr("por.txt", "Go.\tVai.\n")
    assert tatoeba.language_of(archive) == "Portuguese"
    assert tatoeba.pair_file(archive).read()[0].tgt == ["vai", "."]


def test_pair_file_names_the_language_from_the_file_or_the_argument(tmp_path):
    spanish, mine = tmp_path / "spa.txt", tmp_path / "mine.txt"
    spanish.write_text(SPANISH, encoding="utf-8")
    mine.write_text(SPANISH, encoding="utf-8")
    assert tatoeba.pair_file(spanish).language == "Spanish"
    assert tatoeba.pair_file(spanish, language="Castilian").language == "Castilian"
    assert tatoeba.pair_file(mine).language == tatoeba.UNNAMED_LANGUAGE
    assert [e.tgt for e in tatoeba.pair_file(spanish).read()] == [["ve", "."], ["hola", "."]]


def test_the_digest_is_of_the_content_whatever_the_name(tmp_path):
    first, second = tmp_path / "spa.txt", tmp_path / "copy.txt"
    first.write_text(SPANISH, encoding="utf-8")
    second.write_text(SPANISH, encoding="utf-8")
    assert tatoeba.pair_file(first).digest == tatoeba.pair_file(second).digest
    second.write_text(SPANISH + "Run!\t¡Corre!\n", encoding="utf-8")
    assert tatoeba.pair_file(first).digest != tatoeba.pair_file(second).digest
    assert len(tatoeba.pair_file(first).digest) == 16


def test_only_the_shipped_sample_s_bytes_are_the_shipped_sample(tmp_path):
    sample = tatoeba.pair_file()
    assert sample.path == tatoeba.sample_path() and sample.language == "French" and sample.shipped
    copy = shutil.copy(tatoeba.sample_path(), tmp_path / "my-copy.txt.xz")
    assert tatoeba.pair_file(copy).shipped
    other = tmp_path / "fra-eng.txt"
    other.write_text("Go.\tVa !\n", encoding="utf-8")
    assert tatoeba.pair_file(other).language == "French" and not tatoeba.pair_file(other).shipped


def test_pair_file_refuses_a_missing_file_and_an_empty_language(tmp_path):
    with pytest.raises(FileNotFoundError, match="spa.txt does not exist"):
        tatoeba.pair_file(tmp_path / "spa.txt")
    (tmp_path / "spa.txt").write_text(SPANISH, encoding="utf-8")
    with pytest.raises(ValueError, match="language=' '"):
        tatoeba.pair_file(tmp_path / "spa.txt", language=" ")
