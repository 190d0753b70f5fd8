"""Real sentence pairs from Tatoeba, any language pair: split words, read pair files, fetch the full corpus.

    examples = load_sample()                          # 76,037 English-French pairs shipped with the course
    examples = read_pairs("spa-eng.zip")              # any manythings.org/anki archive, as downloaded
    examples = read_pairs(fetch("fra-eng"))           # the full English-French corpus, downloaded once
    pairs = pair_file("spa-eng.zip")                  # its language ("Spanish"), a hash of it; pairs.read()
    data = chapters.pairs_data(examples, min_freq=2)  # splits and vocabularies
    bleu = metrics.multi_reference_bleu(hypotheses, reference_sets(data.test))

manythings.org publishes one file per language pair, "English<TAB>other language[<TAB>attribution]" a
line, collected from the Tatoeba project (https://tatoeba.org, CC-BY 2.0 FR; see corpora/README.md).
The course needs no download: its chapter runs on the shipped sample (`load_sample`). `fetch` is for
those who want the whole corpus; it is the one function here that touches the network.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import http.client
import io
import itertools
import lzma
import os
import re
import shutil
import unicodedata
import urllib.error
import urllib.request
import uuid
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import BinaryIO

from tqdm.auto import tqdm

from attn_course.data.tasks import Example, preprocess_fra_eng
from attn_course.validation import check_int, check_number

FRA_ENG_SOURCES = (
    "https://www.manythings.org/anki/fra-eng.zip (Tatoeba sentence pairs; fra.txt inside)",
    "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip (the copy d2l's MTFraEng downloads)",
)

#: Lines of the shipped sample, corpora/fra-eng.txt.xz (English<TAB>French).
SAMPLE_PAIRS = 76037
SAMPLE_FILE = "fra-eng.txt.xz"

#: Full corpora `fetch` knows: name -> (URL, SHA-1 of the archive). fra-eng is d2l's own copy,
#: ``d2l.torch.DATA_HUB["fra-eng"]``, so the course and d2l's MTFraEng read the same fra.txt.
ARCHIVES = {
    "fra-eng": ("http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip",
                "94646ad1522d915e7b0f9296181140edcf86a4f5"),
}
CACHE_ENV = "ATTN_COURSE_DATA"
_CHUNK = 1 << 16

# ------------------------------------------------------------------------------------------------ tokenize
# Scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, Han (with 々 〆 〇), Hiragana,
# Katakana (full and half width). Each of their characters is one token.
_UNSPACED = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x19E0, 0x19FF), (0x3005, 0x3007),
             (0x3040, 0x30FF), (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xA9E0, 0xA9FF),
             (0xAA60, 0xAA7F), (0xF900, 0xFAFF), (0xFF66, 0xFF9F), (0x20000, 0x3FFFF))
# An apostrophe or hyphen between two letters stays inside the word: "don't", "l'ai-je", "aujourd'hui".
_JOINERS = "'\u2019-\u2010\u2011"


def _ranges_by_category() -> dict[str, list[tuple[int, int]]]:
    """Code point ranges (first, last) by major Unicode category ("P" punctuation, "M" marks, ...) in planes
    0, 1 and 14 (planes 2 and 3 hold Han ideographs, which _UNSPACED covers; 15 and 16 are private use)."""
    ranges = collections.defaultdict(list)
    for block in (range(0x20000), range(0xE0000, 0xE1000)):
        start = block.start
        for major, group in itertools.groupby(map(unicodedata.category, map(chr, block)), key=lambda c: c[0]):
            size = sum(1 for _ in group)
            ranges[major].append((start, start + size - 1))
            start += size
    return ranges


def _char_class(ranges: Sequence[tuple[int, int]]) -> str:
    """The inside of a regex [...] that matches the code points of the (first, last) ranges."""
    return "".join(re.escape(chr(a)) + ("" if a == b else "-" + re.escape(chr(b))) for a, b in ranges)


def _token_pattern() -> re.Pattern:
    """A regex whose matches, left to right, are the tokens of a lower-cased sentence (see `tokenize`)."""
    categories = _ranges_by_category()
    punct, mark, unspaced = (_char_class(r) for r in (categories["P"], categories["M"], _UNSPACED))
    letter_before = rf"(?<=[^\W\d_])(?<![{unspaced}])"   # [^\W\d_] is a letter; not one of Han, Thai, ...
    letter_after = rf"(?=[^\W\d_])(?![{unspaced}])"
    joiner = rf"{letter_before}[{re.escape(_JOINERS)}]{letter_after}"
    word = rf"(?:[^\s{punct}{unspaced}]+|{joiner}|[{mark}])+"
    alone = rf"[{unspaced}{punct}][{mark}]*"   # a punctuation mark or a Han, Thai, ... character
    return re.compile(f"{word}|{alone}")


_TOKEN = _token_pattern()


def tokenize(text: str) -> list[str]:
    """Split one sentence of any manythings.org/Tatoeba language into lower-case word tokens.

    Non-breaking spaces (U+00A0, U+202F) become spaces and the text is lower-cased (str.lower). Every
    punctuation character (Unicode category P*: . , ! ? ¿ ¡ « » " : ; 。 ？ ！ 、 ...) is a token of its own,
    except an apostrophe (' or ’) or hyphen between two letters, which stays inside its word ("don't",
    "l'ai-je", "aujourd'hui" are one token each, as in d2l). Each character of a script written without
    spaces (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar) is a token: "我爱你。" -> 我 爱 你 。.
    Everything else is split on whitespace. A combining mark stays with the character before it.

    English and French come out as d2l's preprocessing (`attn_course.data.tasks.preprocess_fra_eng`, then
    split on spaces) gives them for all but 98 of the 76,037 lines of the shipped sample, all of them
    because d2l splits off only , . ! ? and only on their left: it leaves every other mark glued to its
    word (quotes, « », :, %, /, &, a ‘, an apostrophe that ends a word, a hyphen between digits:
    '"look', '«ouistiti»', '3:30', '90%', "boys'", '223-1374') and the digits or letters after a , or .
    glued to the mark ('50 ,000', '10 .30', 'a .m .', ',"').

    Where it does not work well: Japanese and Chinese get characters, not words (a word segmenter such
    as MeCab or jieba would find words); Thai, Lao, Khmer and Myanmar get letters and syllable pieces,
    not words; Korean is split on spaces only, so its particles stay on their nouns; Arabic and Hebrew
    clitics (و "and", ال "the") are not separated; German compounds stay whole; numbers with separators
    ("3.14", "50,000", "6:30") are cut at the mark; a ‘ used as an apostrophe splits its word.
    """
    return _TOKEN.findall(text.replace("\u202f", " ").replace("\xa0", " ").lower())


# ------------------------------------------------------------------------------------------------ read
def read_pairs(path: str | Path, *, num_pairs: int | None = None,
               tokenizer: Callable[[str], list[str]] = tokenize) -> list[Example]:
    """Read a manythings.org/Tatoeba pair file into Examples without links (src: English, tgt: the other).

    path: a plain ``.txt`` file, an xz-compressed ``.txt.xz``, or the ``.zip`` archive as downloaded (the
    single ``*.txt`` inside that is not ``_about.txt`` is read). Each line holds 2 or 3 tab-separated
    columns: English, its translation, and an attribution that is ignored. UTF-8, with or without a BOM.
    num_pairs: read only the first num_pairs pairs (None: all). tokenizer: str -> list of tokens, applied
    to each side (default `tokenize`).

    Blank lines are skipped. Any other line without 2 or 3 columns, or with a side that has no tokens, is
    an error: ValueError naming the file and the line number (a malformed line means the file is not a
    pair file or was damaged, so nothing is skipped silently).
    """
    if num_pairs is not None:
        check_int("num_pairs", num_pairs, low=0)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: read_pairs needs a pair file (.txt, .txt.xz or "
                                ".zip). load_sample() reads the shipped English-French sample; fetch() "
                                "downloads the full corpus.")
    out: list[Example] = []
    with _open_lines(path) as (lines, where):
        for number, line in enumerate(lines, start=1):
            if num_pairs is not None and len(out) >= num_pairs:
                break
            line = line.rstrip("\r\n")
            if line.strip():
                out.append(_parse_line(line, tokenizer, f"{where}, line {number}"))
    return out


def _parse_line(line: str, tokenizer: Callable[[str], list[str]], where: str) -> Example:
    columns = line.split("\t")
    if len(columns) not in (2, 3):
        raise ValueError(f"{where}: expected 2 or 3 tab-separated columns (English, translation[, "
                         f"attribution]), got {len(columns)}: {line[:80]!r}")
    src, tgt = tokenizer(columns[0]), tokenizer(columns[1])
    if not src or not tgt:
        side = "English (first)" if not src else "translation (second)"
        raise ValueError(f"{where}: the {side} column is empty: {line[:80]!r}")
    return Example(src, tgt)


@contextlib.contextmanager
def _open_lines(path: Path) -> Iterator[tuple[io.TextIOBase, str]]:
    """The lines of a .txt, .txt.xz or .zip pair file, and how to name the file in an error."""
    if path.suffix == ".xz":
        with lzma.open(path, "rt", encoding="utf-8-sig") as f:
            yield f, str(path)
    elif path.suffix == ".zip":
        with zipfile.ZipFile(path) as archive:
            member = _pair_member(archive, path)
            with io.TextIOWrapper(archive.open(member), encoding="utf-8-sig") as f:
                yield f, f"{path} ({member.filename})"
    else:
        with open(path, encoding="utf-8-sig") as f:
            yield f, str(path)


def _pair_member(archive: zipfile.ZipFile, path: Path) -> zipfile.ZipInfo:
    """The one *.txt file in the archive that is not _about.txt (manythings adds that one)."""
    found = [info for info in archive.infolist() if not info.is_dir()
             and info.filename.endswith(".txt") and Path(info.filename).name != "_about.txt"]
    if len(found) != 1:
        raise ValueError(f"{path} holds {len(found)} pair files {[i.filename for i in found]}, expected "
                         f"exactly one *.txt besides _about.txt; it has {archive.namelist()[:10]}")
    return found[0]


# ------------------------------------------------------------------------------------------------ sample
def sample_path() -> Path:
    """The shipped English-French sample, ``attn_course/data/corpora/fra-eng.txt.xz``, found by
    importlib.resources (so it is the installed package's own copy, wherever pip put it)."""
    ref = resources.files("attn_course.data.corpora") / SAMPLE_FILE
    if not isinstance(ref, Path):
        raise FileNotFoundError(f"the sample {ref} is inside an archive, not a file on disk; load_sample() "
                                "reads it from there")
    return ref


def load_sample(num_pairs: int | None = None) -> list[Example]:
    """The shipped sample's SAMPLE_PAIRS = 76,037 English-French pairs (the first num_pairs of them), read
    by `read_pairs` with `tokenize`; ordered from the shortest English sentence to the longest."""
    with resources.as_file(resources.files("attn_course.data.corpora") / SAMPLE_FILE) as path:
        return read_pairs(path, num_pairs=num_pairs)


def load_fra_eng(path: str | Path | None = None, *, num_pairs: int | None = None) -> list[Example]:
    """Read the tab-separated Tatoeba English–French file (fra.txt) into tokenised Examples without links.

    path: the file (.txt, .txt.xz or the .zip as downloaded), or a folder holding fra.txt; default: the
    76,037 pairs that ship with the course (`sample_path`). Nothing is downloaded: a missing file raises
    FileNotFoundError saying where to get the full one.
    num_pairs: read only the first num_pairs pairs (None: all).

    Read by `read_pairs`. It accepts the 2-column file (English, French) and the current 3-column one
    (English, French, attribution); d2l's reader keeps only lines with exactly 2 columns, so it silently drops
    every line of the 3-column file. Text gets d2l's preprocessing (:func:`preprocess_fra_eng`) and is split
    on whitespace. A UTF-8 BOM is ignored, and so are blank lines. Any other line without 2 or 3 columns, or
    with an empty English or French side, is an error: ValueError naming the file and line number (a malformed
    line means the file is not fra.txt or was damaged, so nothing is skipped silently).
    """
    if num_pairs is not None:
        check_int("num_pairs", num_pairs, low=0)
    path = sample_path() if path is None else Path(path)
    if path.is_dir():
        path = path / "fra.txt"
    if not path.is_file():
        sources = "\n  ".join(FRA_ENG_SOURCES)
        raise FileNotFoundError(
            f"{path} does not exist. Nothing is downloaded at run time; to use the real English–French data, "
            f"download fra-eng.zip from\n  {sources}\nand pass the path of the .zip or of its fra.txt to "
            f"load_fra_eng (`fetch` downloads it where a network is reachable)."
        )
    return read_pairs(path, num_pairs=num_pairs, tokenizer=lambda text: preprocess_fra_eng(text).split())


# ------------------------------------------------------------------------------------------------ pair files
#: The languages of manythings.org's pair files by the ISO 639-3 code their names start with ("spa-eng.zip",
#: "spa.txt"); `language_of` reads a file's name with it.
LANGUAGES = {
    "afr": "Afrikaans", "ang": "Old English", "ara": "Arabic", "arq": "Algerian Arabic",
    "ary": "Moroccan Arabic", "arz": "Egyptian Arabic", "ast": "Asturian", "avk": "Kotava",
    "aze": "Azerbaijani", "bel": "Belarusian", "ben": "Bengali", "ber": "Berber", "bos": "Bosnian",
    "bre": "Breton", "bul": "Bulgarian", "cat": "Catalan", "cbk": "Chavacano", "ceb": "Cebuano",
    "ces": "Czech", "cha": "Chamorro", "chv": "Chuvash", "cmn": "Mandarin Chinese", "cor": "Cornish",
    "csb": "Kashubian", "cym": "Welsh", "dan": "Danish", "deu": "German", "dsb": "Lower Sorbian",
    "dtp": "Central Dusun", "ell": "Greek", "epo": "Esperanto", "est": "Estonian", "eus": "Basque",
    "fao": "Faroese", "fin": "Finnish", "fra": "French", "fry": "Frisian", "gla": "Scottish Gaelic",
    "gle": "Irish", "glg": "Galician", "gos": "Gronings", "gsw": "Swiss German", "heb": "Hebrew",
    "hin": "Hindi", "hrv": "Croatian", "hrx": "Hunsrik", "hsb": "Upper Sorbian", "hun": "Hungarian",
    "hye": "Armenian", "ido": "Ido", "ile": "Interlingue", "ina": "Interlingua", "ind": "Indonesian",
    "isl": "Icelandic", "ita": "Italian", "jav": "Javanese", "jbo": "Lojban", "jpn": "Japanese",
    "kab": "Kabyle", "kat": "Georgian", "kaz": "Kazakh", "kha": "Khasi", "khm": "Khmer", "kor": "Korean",
    "kur": "Kurdish", "kzj": "Coastal Kadazan", "lat": "Latin", "lfn": "Lingua Franca Nova",
    "lit": "Lithuanian", "lvs": "Latvian", "mal": "Malayalam", "mar": "Marathi", "mhr": "Meadow Mari",
    "mkd": "Macedonian", "mon": "Mongolian", "nds": "Low German", "nld": "Dutch", "nno": "Norwegian Nynorsk",
    "nob": "Norwegian Bokmål", "oci": "Occitan", "orv": "Old East Slavic", "pam": "Kapampangan",
    "pes": "Persian", "pol": "Polish", "por": "Portuguese", "ron": "Romanian", "rus": "Russian",
    "slk": "Slovak", "slv": "Slovenian", "spa": "Spanish", "sqi": "Albanian", "srp": "Serbian",
    "swc": "Congo Swahili", "swe": "Swedish", "swh": "Swahili", "tam": "Tamil", "tat": "Tatar",
    "tgl": "Tagalog", "tha": "Thai", "tlh": "Klingon", "tok": "Toki Pona", "tur": "Turkish", "uig": "Uyghur",
    "ukr": "Ukrainian", "urd": "Urdu", "uzb": "Uzbek", "vie": "Vietnamese", "wuu": "Shanghainese",
    "yid": "Yiddish", "yue": "Cantonese", "zsm": "Malay",
}
#: The name `pair_file` gives a language that neither its argument nor the file's name says.
UNNAMED_LANGUAGE = "target-language"
_CODE = re.compile(r"([a-z]{3})(?:-eng)?(?:[-.]|$)")


def language_of(path: str | Path) -> str | None:
    """The name of a pair file's other language, read from the ISO 639-3 code its file name starts with
    ("spa-eng.zip", "spa.txt" -> "Spanish"; `LANGUAGES`), or that of its folder ("deu-eng/pairs.txt" ->
    "German"), or, for a .zip, that of the pair file inside; None when none of them names one."""
    path = Path(path)
    names = [path.name, path.parent.name]
    if path.suffix == ".zip" and path.is_file():
        with zipfile.ZipFile(path) as archive:
            names.append(Path(_pair_member(archive, path).filename).name)
    for name in names:
        found = _CODE.match(name.lower())
        if found and found[1] in LANGUAGES:
            return LANGUAGES[found[1]]
    return None


@dataclass(frozen=True)
class PairFile:
    """A pair file to train on: where it is, the name of its other language, and a hash of its bytes.

    digest: the first 16 hex digits of the SHA-256 of the file as it is on disk, so that two files with the
    same content have the same digest whatever their names (models trained on a file are kept under it).
    """

    path: Path
    language: str
    digest: str

    @property
    def shipped(self) -> bool:
        """Whether this is the sample shipped with the course (the same bytes), the data on which the course
        measured its figures over seeds and machines."""
        return self.digest == _digest_of(sample_path())

    def read(self, num_pairs: int | None = None) -> list[Example]:
        """The file's pairs, read by `read_pairs` with `tokenize` (the first num_pairs of them)."""
        return read_pairs(self.path, num_pairs=num_pairs)


def pair_file(path: str | Path | None = None, *, language: str | None = None) -> PairFile:
    """The pair file at `path` (.txt, .txt.xz or .zip as downloaded; None: the shipped English-French
    sample), its other language named `language` if given, else by `language_of` its file name, else
    UNNAMED_LANGUAGE. Raises FileNotFoundError for a missing file, as `read_pairs` does."""
    path = sample_path() if path is None else Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: pair_file needs a pair file (.txt, .txt.xz or "
                                ".zip); pair_file() with no path is the shipped English-French sample")
    if language is not None and not (isinstance(language, str) and language.strip()):
        raise ValueError(f"language={language!r}, expected a language's name such as 'Spanish', or None")
    name = language or language_of(path) or UNNAMED_LANGUAGE
    return PairFile(path, name, _digest_of(path))


def _digest_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ fetch
def fetch(name: str = "fra-eng", *, cache_dir: str | Path | None = None, url: str | None = None,
          sha1: str | None = None, progress: bool = True, timeout: float = 30) -> Path:
    """Download the full corpus `name` (a key of ARCHIVES) once; return the path of its pair file.

    cache_dir: where the archive is kept, default $ATTN_COURSE_DATA or ~/.cache/attn-course. An archive
    already there with the expected SHA-1 (`sha1`, default the one pinned in ARCHIVES) is used without any
    network access. Otherwise it is streamed from `url` (default the pinned one; tests pass a local
    server) into a temporary file in cache_dir, with a progress bar unless progress=False, and moved into
    place only once its SHA-1 is the expected one. The pair file is extracted beside it once, into
    cache_dir/name/ (fra.txt for fra-eng). timeout: seconds to wait for the server at each step.

    Raises ValueError for an unknown name or a download with another SHA-1 (nothing is kept), and
    ConnectionError when the server cannot be reached: the course needs no download (`load_sample`).
    """
    if name not in ARCHIVES:
        raise ValueError(f"name={name!r} is unknown, expected one of {sorted(ARCHIVES)}")
    check_number("timeout", timeout, low=0, low_open=True)
    pinned_url, pinned_sha1 = ARCHIVES[name]
    url, sha1 = url or pinned_url, (sha1 or pinned_sha1).lower()
    folder = _cache_folder(cache_dir)
    archive = folder / Path(pinned_url).name
    if not (archive.is_file() and _sha1_of(archive) == sha1):
        _download(url, archive, sha1, progress=progress, timeout=timeout)
    return _extract(archive, folder / name)


def _cache_folder(cache_dir: str | Path | None) -> Path:
    if cache_dir is None:
        cache_dir = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "attn-course"
    folder = Path(cache_dir).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _sha1_of(path: Path) -> str:
    digest = hashlib.sha1()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def _replacing(target: Path) -> Iterator[BinaryIO]:
    """A new file beside `target` that becomes `target` when the block ends, or is deleted if it raises
    (so `target` is never half written)."""
    partial = target.with_name(f"{target.name}.{uuid.uuid4().hex[:8]}.part")
    try:
        with open(partial, "xb") as out:
            yield out
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def _download(url: str, archive: Path, sha1: str, *, progress: bool, timeout: float) -> None:
    """Stream url into a temporary file beside `archive`; it becomes `archive` if its SHA-1 is `sha1`."""
    with _replacing(archive) as out:
        actual = _stream(url, out, archive, progress=progress, timeout=timeout)
        if actual != sha1:
            raise ValueError(f"{url} sent a file with SHA-1 {actual}, expected {sha1}; it was deleted. "
                             "The archive may have changed on the server or been damaged on the way.")


def _stream(url: str, out: BinaryIO, archive: Path, *, progress: bool, timeout: float) -> str:
    """Copy url's body into `out` in chunks with a progress bar; return its SHA-1 (hex)."""
    digest = hashlib.sha1()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            total = int(response.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=archive.name,
                      disable=not progress) as bar:
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
    except urllib.error.HTTPError as err:
        answer = f"it answered HTTP {err.code} {err.reason}"
        raise ConnectionError(_offline_help(url, archive, answer)) from err
    except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as err:
        reason = getattr(err, "reason", None) or err
        raise ConnectionError(_offline_help(url, archive, f"it could not be reached ({reason})")) from err
    return digest.hexdigest()


def _offline_help(url: str, archive: Path, what: str) -> str:
    return (f"Could not download {url}: {what}. The course needs no download: every chapter runs on the "
            f"shipped sample, load_sample(). To use the full corpus offline, download {Path(url).name} "
            f"elsewhere and copy it to {archive} (fetch() then checks its SHA-1 and uses it), or pass the "
            "archive you have to read_pairs().")


def _extract(archive: Path, folder: Path) -> Path:
    """The archive's pair file extracted into folder (kept if already there with the archive's CRC-32)."""
    with zipfile.ZipFile(archive) as zipped:
        member = _pair_member(zipped, archive)
        target = folder / Path(member.filename).name
        if not (target.is_file() and _crc32_of(target) == member.CRC):
            folder.mkdir(parents=True, exist_ok=True)
            with _replacing(target) as out, zipped.open(member) as source:
                shutil.copyfileobj(source, out, _CHUNK)
    return target


def _crc32_of(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


# ------------------------------------------------------------------------------------------------ score
def reference_sets(examples: Sequence[Example], *, corpus: Sequence[Example] | None = None
                   ) -> list[list[list[str]]]:
    """For each example, every distinct target whose source is the same, in corpus order: looked up in
    `corpus` (default: `examples` themselves), the example's own target always among them.

    These are the references `attn_course.measure.metrics.multi_reference_bleu` takes: Tatoeba often has
    several translations of one sentence ("be nice ." -> "sois gentil !", "soyez gentille !").
    `chapters.pairs_data` keeps all translations of a source in one split, so ``reference_sets(data.test)``
    sees all of them that were drawn; ``corpus=`` the whole file finds those that were not.
    """
    by_source: dict[tuple[str, ...], list[list[str]]] = collections.defaultdict(list)
    for example in (examples if corpus is None else corpus):
        targets = by_source[tuple(example.src)]
        if example.tgt not in targets:
            targets.append(example.tgt)
    sets = []
    for example in examples:
        targets = by_source[tuple(example.src)]
        sets.append(list(targets) if example.tgt in targets else [example.tgt, *targets])
    return sets


def distinct_sources(examples: Sequence[Example]) -> list[Example]:
    """The first example of each source sentence, in corpus order: a test set in which a sentence with
    several translations counts once (score it with `reference_sets`)."""
    seen: set[tuple[str, ...]] = set()
    firsts = []
    for example in examples:
        if tuple(example.src) not in seen:
            seen.add(tuple(example.src))
            firsts.append(example)
    return firsts
