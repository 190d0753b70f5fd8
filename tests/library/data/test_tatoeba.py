"""Tests of attn_course.data.tatoeba: the tokenizer, pair files, the shipped sample, fetch, any language
pair."""

from __future__ import annotations

import hashlib
import http.server
import io
import lzma
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import zipfile
from importlib import resources
from pathlib import Path

import pytest

from attn_course.course import chapters
from attn_course.data import tatoeba
from attn_course.data.tasks import Example, preprocess_fra_eng
from attn_course.data.tatoeba import (
    distinct_sources,
    fetch,
    load_fra_eng,
    load_sample,
    read_pairs,
    reference_sets,
    sample_path,
    tokenize,
)
from attn_course.measure.evaluation import translations
from attn_course.measure.metrics import multi_reference_bleu
from attn_course.training.loop import TrainConfig


# ---------------------------------------------------------------------------------------------- tokenize
@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("I don't know, Tom.", ["i", "don't", "know", ",", "tom", "."]),
        ("Well-known students' \"rules\"!", ["well-known", "students", "'", '"', "rules", '"', "!"]),
        ("Je l'ai-je vu aujourd'hui\u202f?", ["je", "l'ai-je", "vu", "aujourd'hui", "?"]),
        ("Il a dit «\u00a0Bonjour\u00a0»\u202f!", ["il", "a", "dit", "«", "bonjour", "»", "!"]),
        ("Il a dit «Salut».", ["il", "a", "dit", "«", "salut", "»", "."]),
        ("C’est l’été.", ["c’est", "l’été", "."]),
        ("¿Dónde está el baño?", ["¿", "dónde", "está", "el", "baño", "?"]),
        ("¡Qué día más bonito!", ["¡", "qué", "día", "más", "bonito", "!"]),
        ("Die Straße ist schön; Übermorgen: JA.",
         ["die", "straße", "ist", "schön", ";", "übermorgen", ":", "ja", "."]),
        ("我爱你。", ["我", "爱", "你", "。"]),
        ("你叫什么名字？", ["你", "叫", "什", "么", "名", "字", "？"]),
        ("我很好，谢谢！", ["我", "很", "好", "，", "谢", "谢", "！"]),
        ("私はコーヒーが好きです。",
         ["私", "は", "コ", "ー", "ヒ", "ー", "が", "好", "き", "で", "す", "。"]),
        ("Я тебя люблю, Том!", ["я", "тебя", "люблю", ",", "том", "!"]),
        ("Tom是我的朋友。", ["tom", "是", "我", "的", "朋", "友", "。"]),
        ("我用iPhone 15。", ["我", "用", "iphone", "15", "。"]),
        ("나는 학생입니다.", ["나는", "학생입니다", "."]),
        ("สวัสดีครับ", ["ส", "วั", "ส", "ดี", "ค", "รั", "บ"]),
        ("  ", []),
    ],
)
def test_tokenize_splits_words_punctuation_and_unspaced_scripts(text, tokens):
    assert tokenize(text) == tokens


def test_tokenize_keeps_an_apostrophe_or_hyphen_only_between_two_letters():
    assert tokenize("rock'n'roll -ok- 'tis 33-year-old") == [
        "rock'n'roll", "-", "ok", "-", "'", "tis", "33", "-", "year-old"]
    assert tokenize("我-你 a-我") == ["我", "-", "你", "a", "-", "我"]   # Han is not a letter of a word here


def test_tokenize_matches_d2l_on_plain_english_and_french():
    for text in ("Go.", "Run!", "Wait, please.", "J'ai gagné !", "Ça va\u202f?", "Qu'est-ce que c'est ?"):
        assert tokenize(text) == preprocess_fra_eng(text).split()


@pytest.mark.slow
def test_tokenize_differs_from_d2l_on_the_number_of_sample_lines_its_docstring_gives():
    with lzma.open(sample_path(), "rt", encoding="utf-8-sig") as f:
        lines = f.read().splitlines()
    differ = sum(any(tokenize(side) != preprocess_fra_eng(side).split() for side in line.split("\t")[:2])
                 for line in lines)
    assert len(lines) == tatoeba.SAMPLE_PAIRS
    assert differ == 98
    assert f"all but {differ} of the 76,037 lines" in " ".join(tokenize.__doc__.split())


# ---------------------------------------------------------------------------------------------- read_pairs
ATTRIBUTION = "CC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM) & #1158250 (Wittydev)"


def _write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def _zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def _pairs(examples: list[Example]) -> list[tuple[list[str], list[str]]]:
    return [(e.src, e.tgt) for e in examples]


def test_read_pairs_takes_two_and_three_columns_a_bom_crlf_and_blank_lines(tmp_path):
    text = f"\ufeffGo.\tVa !\r\n\r\nWho?\tQui ?\t{ATTRIBUTION}\r\n\n"
    examples = read_pairs(_write(tmp_path / "fra.txt", text))
    assert _pairs(examples) == [(["go", "."], ["va", "!"]), (["who", "?"], ["qui", "?"])]
    assert all(e.sure == e.possible == set() for e in examples)


def test_read_pairs_reads_xz_and_the_zip_as_downloaded(tmp_path):
    text = f"Hi.\t¡Hola!\t{ATTRIBUTION}\nThanks.\tGracias.\t{ATTRIBUTION}\n"
    expected = [(["hi", "."], ["¡", "hola", "!"]), (["thanks", "."], ["gracias", "."])]
    xz = tmp_path / "spa.txt.xz"
    xz.write_bytes(lzma.compress(text.encode()))
    archive = _zip(tmp_path / "spa-eng.zip", {"_about.txt": "About Tatoeba\tand us\n", "spa.txt": text})
    assert _pairs(read_pairs(xz)) == _pairs(read_pairs(archive)) == expected


def test_read_pairs_refuses_a_zip_without_exactly_one_pair_file_naming_them(tmp_path):
    files = {"spa.txt": "Hi.\tHola.\n", "deu.txt": "Hi.\tHallo.\n", "_about.txt": ""}
    two = _zip(tmp_path / "two.zip", files)
    with pytest.raises(ValueError, match=r"2 pair files \['spa\.txt', 'deu\.txt'\]"):
        read_pairs(two)
    with pytest.raises(ValueError, match=r"0 pair files.*_about\.txt"):
        read_pairs(_zip(tmp_path / "none.zip", {"_about.txt": ""}))


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("Go.\tVa !\nHello there\n", 2, "got 1"),
        ("Go.\tVa !\n\nGo.\tVa !\tx\ty\n", 3, "got 4"),
        ("Go.\tVa !\n\t Salut\n", 2, "English"),
        ("Go.\tVa !\nHi.\t \n", 2, "translation"),
    ],
)
def test_a_malformed_line_is_an_error_naming_the_file_and_line(tmp_path, text, line, message):
    path = _write(tmp_path / "pairs.txt", text)
    with pytest.raises(ValueError, match=rf"pairs\.txt, line {line}\b.*{message}"):
        read_pairs(path)
    with pytest.raises(ValueError, match=rf"pairs\.zip \(spa\.txt\), line {line}\b"):
        read_pairs(_zip(tmp_path / "pairs.zip", {"spa.txt": text}))


def test_read_pairs_stops_after_num_pairs_before_a_later_bad_line(tmp_path):
    path = _write(tmp_path / "deu.txt", "".join(f"Go {k}.\tGeh {k}.\n" for k in range(10)) + "broken\n")
    assert [e.tgt for e in read_pairs(path, num_pairs=2)] == [["geh", "0", "."], ["geh", "1", "."]]
    assert read_pairs(path, num_pairs=0) == []
    with pytest.raises(ValueError, match="num_pairs"):
        read_pairs(path, num_pairs=-1)


def test_read_pairs_takes_any_target_language_and_tokenizer(tmp_path):
    path = _write(tmp_path / "cmn.txt", f"I love you.\t我爱你。\t{ATTRIBUTION}\nHi!\tПривет!\n")
    assert _pairs(read_pairs(path)) == [(["i", "love", "you", "."], ["我", "爱", "你", "。"]),
                                        (["hi", "!"], ["привет", "!"])]
    assert read_pairs(path, tokenizer=str.split)[0].tgt == ["我爱你。"]


def test_a_missing_pair_file_points_to_the_sample_and_fetch(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nowhere\.txt.*load_sample\(\).*fetch\(\)"):
        read_pairs(tmp_path / "nowhere.txt")


def test_load_fra_eng_reads_through_read_pairs_with_d2l_tokens(tmp_path):
    text = 'He said "no."\tIl a dit «\u00a0non\u00a0».\n'
    path = _write(tmp_path / "fra.txt", text)
    assert _pairs(load_fra_eng(path)) == [(["he", "said", '"no', '."'], ["il", "a", "dit", "«", "non", "»",
                                                                       "."])]
    assert _pairs(read_pairs(path)) == [(["he", "said", '"', "no", ".", '"'], ["il", "a", "dit", "«", "non",
                                                                             "»", "."])]
    archive = _zip(tmp_path / "fra-eng.zip", {"fra-eng/fra.txt": text, "fra-eng/_about.txt": ""})
    assert load_fra_eng(archive) == load_fra_eng(path)


# ---------------------------------------------------------------------------------------------- the sample
def test_sample_path_is_the_packages_own_file_found_by_importlib_resources():
    path = sample_path()
    assert path == resources.files("attn_course.data.corpora") / "fra-eng.txt.xz"
    assert path.is_file() and path.parent.name == "corpora"


def test_load_sample_reads_the_first_pairs_of_the_file():
    assert _pairs(load_sample(num_pairs=3)) == [(["go", "."], ["va", "!"]), (["run", "!"], ["cours", "!"]),
                                                (["run", "!"], ["courez", "!"])]


@pytest.mark.slow
def test_load_sample_reads_all_76037_pairs_first_and_last_as_in_the_file():
    examples = load_sample()
    assert len(examples) == tatoeba.SAMPLE_PAIRS == 76037
    assert (examples[0].src, examples[0].tgt) == (["go", "."], ["va", "!"])
    assert (examples[-1].src, examples[-1].tgt) == (["my", "whole", "family", "is", "doing", "well", "."],
                                                    ["toute", "ma", "famille", "se", "porte", "bien", "."])


@pytest.mark.slow
def test_the_sample_is_found_when_the_package_lives_outside_the_repository(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(Path(tatoeba.__file__).parents[1], site / "attn_course",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = ("import attn_course.data.tatoeba as t; print(t.sample_path()); "
            "print(len(t.load_sample(num_pairs=5)))")
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120, check=True)
    path, count = result.stdout.split()
    assert Path(path) == site / "attn_course" / "data" / "corpora" / "fra-eng.txt.xz"
    assert count == "5"


# ---------------------------------------------------------------------------------------------- fetch
PAIRS_TEXT = f"Go.\tVa !\t{ATTRIBUTION}\nHi.\tSalut !\t{ATTRIBUTION}\n"


def _archive_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("_about.txt", "About these sentences.\n")
        archive.writestr("fra.txt", PAIRS_TEXT)
    return buffer.getvalue()


class _Server:
    """A local HTTP server in a thread that serves `body` (with Content-Length) and counts requests."""

    def __init__(self, body: bytes):
        self.body, self.requests, self.status = body, 0, 200
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests += 1
                self.send_response(server.status)
                self.send_header("Content-Type", "application/zip")
                self.send_header("Content-Length", str(len(server.body)))
                self.end_headers()
                self.wfile.write(server.body)

            def log_message(self, *args):  # keep the test's stderr empty
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/fra-eng.zip"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    serving = _Server(_archive_bytes())
    yield serving
    serving.close()


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


@pytest.mark.slow
def test_fetch_downloads_once_extracts_and_then_needs_no_network(server, tmp_path, capfd):
    sha1 = hashlib.sha1(server.body).hexdigest()
    path = fetch(cache_dir=tmp_path, url=server.url, sha1=sha1, progress=False)
    assert path == tmp_path / "fra-eng" / "fra.txt"
    assert path.read_text(encoding="utf-8") == PAIRS_TEXT
    assert _pairs(read_pairs(path)) == [(["go", "."], ["va", "!"]), (["hi", "."], ["salut", "!"])]
    assert _files(tmp_path) == [tmp_path / "fra-eng" / "fra.txt", tmp_path / "fra-eng.zip"]
    assert fetch(cache_dir=tmp_path, url=server.url, sha1=sha1, progress=False) == path
    assert server.requests == 1
    assert capfd.readouterr() == ("", "")   # progress=False: nothing printed


@pytest.mark.slow
def test_fetched_files_are_readable_as_the_umask_allows_for_a_cache_shared_by_a_class(server, tmp_path):
    umask = os.umask(0o022)
    try:
        path = fetch(cache_dir=tmp_path, url=server.url, sha1=hashlib.sha1(server.body).hexdigest(),
                     progress=False)
    finally:
        os.umask(umask)
    assert [p.stat().st_mode & 0o777 for p in (path, tmp_path / "fra-eng.zip")] == [0o644, 0o644]


@pytest.mark.slow
def test_fetch_shows_a_progress_bar_sized_by_content_length(server, tmp_path, capfd):
    fetch(cache_dir=tmp_path, url=server.url, sha1=hashlib.sha1(server.body).hexdigest())
    err = capfd.readouterr().err
    assert "fra-eng.zip" in err and "100%" in err


@pytest.mark.slow
def test_fetch_replaces_a_damaged_cached_archive_and_extracts_again(server, tmp_path):
    sha1 = hashlib.sha1(server.body).hexdigest()
    (tmp_path / "fra-eng.zip").write_bytes(b"truncated")
    (tmp_path / "fra-eng").mkdir()
    (tmp_path / "fra-eng" / "fra.txt").write_text("stale\tvieux\n")
    path = fetch(cache_dir=tmp_path, url=server.url, sha1=sha1, progress=False)
    assert server.requests == 1
    assert path.read_text(encoding="utf-8") == PAIRS_TEXT


@pytest.mark.slow
def test_fetch_uses_the_cache_folder_named_by_the_environment(server, tmp_path, monkeypatch):
    monkeypatch.setenv(tatoeba.CACHE_ENV, str(tmp_path / "env-cache"))
    path = fetch(url=server.url, sha1=hashlib.sha1(server.body).hexdigest(), progress=False)
    assert path == tmp_path / "env-cache" / "fra-eng" / "fra.txt"


@pytest.mark.slow
def test_a_download_with_the_wrong_checksum_is_an_error_and_leaves_nothing(server, tmp_path):
    pinned = tatoeba.ARCHIVES["fra-eng"][1]
    actual = hashlib.sha1(server.body).hexdigest()
    with pytest.raises(ValueError, match=rf"{re.escape(server.url)}.*{actual}.*expected {pinned}"):
        fetch(cache_dir=tmp_path, url=server.url, progress=False)   # checked against the pinned SHA-1
    assert _files(tmp_path) == []


@pytest.mark.slow
def test_an_unreachable_server_is_a_connection_error_that_points_to_the_sample(tmp_path):
    with socket.socket() as probe:   # a port nobody listens on once this closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/fra-eng.zip"
    with pytest.raises(ConnectionError) as error:
        fetch(cache_dir=tmp_path, url=url, progress=False, timeout=5)
    message = str(error.value)
    assert url in message and "load_sample()" in message and str(tmp_path / "fra-eng.zip") in message
    assert _files(tmp_path) == []


@pytest.mark.slow
def test_an_http_error_is_a_connection_error_naming_the_status(server, tmp_path):
    server.status = 404
    with pytest.raises(ConnectionError, match=rf"{re.escape(server.url)}: it answered HTTP 404.*load_sample"):
        fetch(cache_dir=tmp_path, url=server.url, progress=False)
    assert _files(tmp_path) == []


def test_fetch_refuses_an_unknown_corpus_naming_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match=r"'klingon-eng'.*fra-eng"):
        fetch("klingon-eng", cache_dir=tmp_path)


@pytest.mark.slow
def test_the_pinned_archive_is_d2ls_own():
    d2l = pytest.importorskip("d2l.torch")
    assert tatoeba.ARCHIVES["fra-eng"] == d2l.DATA_HUB["fra-eng"]


# ---------------------------------------------------------------------------------------------- references
def test_reference_sets_gather_every_translation_of_a_source_in_corpus_order():
    examples = [Example(["be", "nice", "."], ["sois", "gentil", "!"]), Example(["hi", "."], ["salut", "."]),
                Example(["be", "nice", "."], ["soyez", "gentils", "!"]),
                Example(["be", "nice", "."], ["sois", "gentil", "!"])]
    nice = [["sois", "gentil", "!"], ["soyez", "gentils", "!"]]
    assert reference_sets(examples) == [nice, [["salut", "."]], nice, nice]


def test_pairs_data_keeps_a_source_in_one_split_and_drops_rare_words():
    examples = [Example([f"s{k}"], [f"t{k % 7}", "rare" if k == 0 else "."]) for k in range(100)]
    examples += [Example(["s1"], ["other"])]
    data = chapters.pairs_data(examples, min_freq=2, seed=0)
    sources = [{tuple(e.src) for e in part} for part in (data.train, data.val, data.test)]
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])
    assert [len(s) for s in sources] == [90, 5, 5]
    assert len(data.train) + len(data.val) + len(data.test) == 101
    assert "rare" not in data.tgt_vocab and "." in data.tgt_vocab
    assert all(f"s{k}" not in data.src_vocab for k in range(2, 100))   # seen once each
    assert ("s1" in data.src_vocab) == (("s1",) in sources[0])            # twice, if in the training split


# ---------------------------------------------------------------------------------------------- any pair
ENGLISH_SPANISH = """\
Hi.\t¡Hola!
Good morning.\tBuenos días.
Good night.\tBuenas noches.
Thank you.\tGracias.
Thank you very much.\tMuchas gracias.
Where is the bathroom?\t¿Dónde está el baño?
Where is the station?\t¿Dónde está la estación?
I am tired.\tEstoy cansado.
I am tired.\tEstoy cansada.
I am hungry.\tTengo hambre.
I am thirsty.\tTengo sed.
Do you speak English?\t¿Hablas inglés?
Do you speak Spanish?\t¿Hablas español?
I don't understand.\tNo entiendo.
I don't know.\tNo sé.
How are you?\t¿Cómo estás?
How are you?\t¿Qué tal?
What is your name?\t¿Cómo te llamas?
My name is Tom.\tMe llamo Tom.
The cat is black.\tEl gato es negro.
The dog is big.\tEl perro es grande.
The house is small.\tLa casa es pequeña.
I like coffee.\tMe gusta el café.
I like tea.\tMe gusta el té.
We are friends.\tSomos amigos.
They are here.\tEstán aquí.
It's cold today.\tHoy hace frío.
It's hot today.\tHoy hace calor.
See you tomorrow!\t¡Hasta mañana!
I love you.\tTe quiero.
"""

ENGLISH_CHINESE = """\
Hi.\t你好。
Good morning.\t早上好。
Good night.\t晚安。
Thank you.\t谢谢。
Thank you very much.\t非常感谢。
Where is the bathroom?\t洗手间在哪里？
Where is the station?\t车站在哪里？
I am tired.\t我累了。
I am hungry.\t我饿了。
I am thirsty.\t我渴了。
Do you speak English?\t你会说英语吗？
Do you speak Chinese?\t你会说中文吗？
I don't understand.\t我不明白。
I don't know.\t我不知道。
How are you?\t你好吗？
What is your name?\t你叫什么名字？
My name is Tom.\t我叫汤姆。
The cat is black.\t猫是黑色的。
The dog is big.\t狗很大。
The house is small.\t房子很小。
I like coffee.\t我喜欢咖啡。
I like tea.\t我喜欢茶。
I like tea.\t我爱喝茶。
We are friends.\t我们是朋友。
They are here.\t他们在这里。
It's cold today.\t今天很冷。
It's hot today.\t今天很热。
See you tomorrow!\t明天见！
I love you.\t我爱你。
Be careful!\t小心！
"""


@pytest.mark.parametrize(("name", "text"), [("spa.txt", ENGLISH_SPANISH), ("cmn.txt", ENGLISH_CHINESE)])
def test_any_language_pair_reads_splits_trains_translates_and_scores(tmp_path, name, text):
    path = _write(tmp_path / name, text * 10)   # repeated pairs are dropped by the split
    examples = read_pairs(path)
    assert len(examples) == 10 * len(text.splitlines())
    data = chapters.pairs_data(examples, min_freq=1, seed=0, fractions=(0.6, 0.2, 0.2))
    recipe = chapters.Recipe(embed_size=8, decoder_hiddens=16, encoder_hiddens=8,
                             train=TrainConfig(epochs=1, batch_size=16))
    model, record = chapters.load_or_train("bahdanau", data, recipe, seed=0)
    hypotheses = translations(model, data.test, data, max_len=20)
    bleu = multi_reference_bleu(hypotheses, reference_sets(data.test))
    assert len(hypotheses) == len(data.test) > 0 and math.isfinite(bleu) and 0 <= bleu <= 100
    assert not record["loaded"] and len(record["train_loss"]) == 1
    if name == "cmn.txt":
        assert all(len(token) == 1 for token in data.tgt_vocab.idx_to_token[4:])
        assert "谢" in data.tgt_vocab and "谢谢" not in data.tgt_vocab


def test_reference_sets_look_up_a_corpus_and_keep_the_example_s_own_target():
    pairs = [Example(["be", "nice", "."], ["sois", "gentil", "!"]),
             Example(["be", "nice", "."], ["soyez", "gentille", "!"]),
             Example(["go", "."], ["va", "!"])]
    held_out = [pairs[0], Example(["go", "."], ["bouge", "!"])]
    assert reference_sets(held_out, corpus=pairs) == [
        [["sois", "gentil", "!"], ["soyez", "gentille", "!"]],
        [["bouge", "!"], ["va", "!"]],
    ]
    assert reference_sets(held_out) == [[["sois", "gentil", "!"]], [["bouge", "!"]]]


def test_distinct_sources_keeps_the_first_example_of_each_source():
    pairs = [Example(["a"], ["x"]), Example(["b"], ["y"]), Example(["a"], ["z"])]
    assert distinct_sources(pairs) == [pairs[0], pairs[1]]
