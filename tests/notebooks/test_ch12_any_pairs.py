"""Chapter 12 runs to the end on a pair file other than the shipped English-French sample, as it invites a
learner to: a small English-German file written here from a grammar, in manythings.org's format."""

from __future__ import annotations

import ast
import itertools
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from attn_course.course import chapters
from attn_course.data import tatoeba

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "notebooks" / "12_real_sentences.ipynb"
#: The environment variables chapter 12 reads: the pair file, and how many pairs it draws from it.
PAIRS_VARIABLE, NUM_PAIRS_VARIABLE = "ATTN_COURSE_PAIRS", "ATTN_COURSE_NUM_PAIRS"
ATTRIBUTION = "CC0 1.0: written by the course's test grammar, not from tatoeba.org"

# ------------------------------------------------------------------------------------------------ grammar
#: English subject -> (German subjects, the person that conjugates them): "you" has three translations, as
#: Tatoeba's pairs often have several.
SUBJECTS = {
    "I": (["Ich"], 0), "you": (["Du", "Ihr", "Sie"], None), "he": (["Er"], 2), "she": (["Sie"], 2),
    "we": (["Wir"], 3), "they": (["Sie"], 5), "Tom": (["Tom"], 2), "Mary": (["Maria"], 2),
}
YOU = {"Du": 1, "Ihr": 4, "Sie": 5}
#: English present, 3rd person, participle -> German forms for ich, du, er, wir, ihr, sie; participle.
VERBS = {
    ("see", "sees", "seen"): ("sehe siehst sieht sehen seht sehen", "gesehen"),
    ("like", "likes", "liked"): ("mag magst mag mögen mögt mögen", "gemocht"),
    ("buy", "buys", "bought"): ("kaufe kaufst kauft kaufen kauft kaufen", "gekauft"),
    ("find", "finds", "found"): ("finde findest findet finden findet finden", "gefunden"),
    ("want", "wants", "wanted"): ("will willst will wollen wollt wollen", "gewollt"),
    ("paint", "paints", "painted"): ("male malst malt malen malt malen", "gemalt"),
}
HAVE = ("have", "has"), "habe hast hat haben habt haben"
NOUNS = {"dog": ("Hund", "m"), "cat": ("Katze", "f"), "car": ("Auto", "n"), "house": ("Haus", "n"),
         "book": ("Buch", "n"), "table": ("Tisch", "m"), "lamp": ("Lampe", "f"), "bird": ("Vogel", "m"),
         "flower": ("Blume", "f"), "apple": ("Apfel", "m")}
ADJECTIVES = {"red": "rot", "big": "groß", "small": "klein", "old": "alt", "new": "neu", "green": "grün",
              "black": "schwarz", None: None}
#: Accusative article and adjective ending by (English article, gender).
ACCUSATIVE = {("the", "m"): ("den", "en"), ("the", "f"): ("die", "e"), ("the", "n"): ("das", "e"),
              ("a", "m"): ("einen", "en"), ("a", "f"): ("eine", "e"), ("a", "n"): ("ein", "es")}


def _object(article: str, adjective: str | None, noun: str) -> tuple[str, str]:
    """(English, German accusative) of an object: ("the", "red", "dog") -> ("the red dog", "den roten
    Hund")."""
    german_noun, gender = NOUNS[noun]
    german_article, ending = ACCUSATIVE[(article, gender)]
    english_article = "an" if article == "a" and (adjective or noun)[0] in "aeiou" else article
    english = " ".join(w for w in (english_article, adjective, noun) if w)
    german_adjective = adjective and ADJECTIVES[adjective] + ending
    german = " ".join(w for w in (german_article, german_adjective, german_noun) if w)
    return english, german


def _clause(subject: str, verb: tuple[str, str, str], perfect: bool, today: bool, obj: tuple[str, str]
            ) -> list[tuple[str, str]]:
    """The English sentence and each of its German translations: present or perfect (whose participle German
    puts last), with "Today" first (after which German puts the verb before its subject)."""
    forms, participle = VERBS[verb]
    third = subject in ("he", "she", "Tom", "Mary")
    pairs = []
    for german_subject in SUBJECTS[subject][0]:
        person = YOU[german_subject] if subject == "you" else SUBJECTS[subject][1]
        if perfect:
            english_verb = f"{HAVE[0][third]} {verb[2]}"
            german_verb, tail = HAVE[1].split()[person], participle
        else:
            english_verb, german_verb, tail = verb[1] if third else verb[0], forms.split()[person], ""
        english = " ".join(w for w in (subject, english_verb, obj[0]) if w)
        if today:
            keeps_capital = german_subject in ("Tom", "Maria") or (subject, german_subject) == ("you", "Sie")
            inner = german_subject if keeps_capital else german_subject.lower()
            english, words = f"today {english}", ("Heute", german_verb, inner, obj[1], tail)
        else:
            words = (german_subject, german_verb, obj[1], tail)
        german = " ".join(w for w in words if w)
        pairs.append((f"{english[0].upper()}{english[1:]}.", f"{german}."))
    return pairs


def write_german_pairs(path: Path, count: int = 4000, *, seed: int = 0) -> Path:
    """Write `count` English sentences of the grammar above and all their German translations to `path`,
    one pair a line, "English<TAB>German<TAB>attribution" as manythings.org's files are, shortest English
    first."""
    choices = list(itertools.product(SUBJECTS, VERBS, (False, True), (False, True), ("the", "a"),
                                     ADJECTIVES, NOUNS))
    drawn = random.Random(seed).sample(choices, count)
    lines = [pair for subject, verb, perfect, today, article, adjective, noun in drawn
             for pair in _clause(subject, verb, perfect, today, _object(article, adjective, noun))]
    lines.sort(key=lambda pair: len(pair[0]))
    path.write_text("".join(f"{en}\t{de}\t{ATTRIBUTION}\n" for en, de in lines), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------ the file
def test_the_grammar_writes_a_german_pair_file_with_several_translations_and_reordering(tmp_path):
    path = write_german_pairs(tmp_path / "deu.txt", 400)
    corpus = tatoeba.pair_file(path)
    assert corpus.language == "German" and not corpus.shipped
    examples = corpus.read()
    assert len(examples) > 400 and all(len(line.split("\t")) == 3 for line in path.read_text().splitlines())
    assert sum(e.tgt[-2] == "gesehen" for e in examples) > 10          # German puts the participle last
    assert max(len(r) for r in tatoeba.reference_sets(examples)) == 3  # "you": du, ihr, Sie


def test_the_grammar_s_german_is_grammatical_on_known_sentences():
    assert _object("the", "red", "dog") == ("the red dog", "den roten Hund")
    assert _object("a", "old", "car") == ("an old car", "ein altes Auto")
    assert _object("a", None, "apple") == ("an apple", "einen Apfel")
    assert _clause("I", ("see", "sees", "seen"), True, False, ("the dog", "den Hund")) == [
        ("I have seen the dog.", "Ich habe den Hund gesehen.")]
    assert _clause("Tom", ("buy", "buys", "bought"), False, True, ("a cat", "eine Katze")) == [
        ("Today Tom buys a cat.", "Heute kauft Tom eine Katze.")]
    assert [de for _, de in _clause("you", ("like", "likes", "liked"), False, True, ("it", "es"))] == [
        "Heute magst du es.", "Heute mögt ihr es.", "Heute mögen Sie es."]
    assert _clause("they", ("see", "sees", "seen"), False, True, ("it", "es")) == [
        ("Today they see it.", "Heute sehen sie es.")]


# ------------------------------------------------------------------------------------------------ the chapter
def _string_constants(source: str) -> list[str]:
    tree = ast.parse("\n".join(line for line in source.splitlines() if not line.startswith(("%", "!"))))
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_no_code_cell_of_chapter_12_names_a_target_language_in_its_own_words():
    """The other language is `LANGUAGE`, named from the pair file: a printed "French" would be wrong on any
    other file."""
    names = re.compile(r"\b(" + "|".join(map(re.escape, tatoeba.LANGUAGES.values())) + r")\b", re.IGNORECASE)
    cells = [cell for cell in nbformat.read(CHAPTER, as_version=4).cells if cell.cell_type == "code"]
    found = [text for cell in cells for text in _string_constants(cell.source) if names.search(text)]
    assert found == []
    assert _string_constants('print(f"{n} French words")') == [" French words"]   # the search finds one


def _chapter_copy(folder: Path, probe: str) -> Path:
    """The chapter with nothing for nbval to compare (its checked cells' tags dropped: their stored outputs
    are the shipped sample's) and `probe` as a last cell, written in folder."""
    notebook = nbformat.read(CHAPTER, as_version=4)
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        cell.metadata["tags"] = [tag for tag in tags if tag != "nbval-check-output"]
    notebook.cells.append(nbformat.v4.new_code_cell(probe))
    path = folder / CHAPTER.name
    nbformat.write(notebook, path)
    (folder / "pytest.ini").write_text("[pytest]\n")     # the course's own pytest settings stay out
    return path


#: Run in the chapter's kernel after its last cell: what it found out about the file, its test set, and the
#: models it kept.
PROBE = """
assert (LANGUAGE, SHIPPED, len(chosen)) == ("German", False, 2), (LANGUAGE, SHIPPED, len(chosen))
assert all(path.is_file() for path in paths.values()), paths
"""


def _model_names(corpus: tatoeba.PairFile, num_pairs: int = chapters.REAL_PAIRS) -> set[str]:
    """The files chapter 12 keeps its two RNN models in, for this pair file and number of pairs (seed 0)."""
    data = chapters.real_data(corpus.read(), num_pairs=num_pairs)
    return {chapters.real_model_path(name, corpus.digest, data, chapters.REAL_RECIPE, 0).name
            for name in ("bahdanau", "no attention")}


@pytest.mark.slow
def test_chapter_12_runs_to_the_end_on_an_english_german_file_and_keeps_the_french_models(tmp_path):
    """nbval (outputs ignored) over the chapter with ATTN_COURSE_PAIRS set to a German file: every cell runs,
    no claim is compared (nothing logged), its models go to files of their own, and the French models
    already in the folder stay as they were."""
    pairs = write_german_pairs(tmp_path / "deu.txt", 4000)
    artifacts, log = tmp_path / "artifacts", tmp_path / "claims.jsonl"
    french, german = _model_names(tatoeba.pair_file()), _model_names(tatoeba.pair_file(pairs), 3000)
    artifacts.mkdir()
    for name in french:
        (artifacts / name).write_bytes(b"a French model")
    env = {**os.environ, PAIRS_VARIABLE: str(pairs), NUM_PAIRS_VARIABLE: "3000", "OMP_NUM_THREADS": "1",
           "ATTN_COURSE_ARTIFACTS": str(artifacts), "ATTN_COURSE_CLAIMS_LOG": str(log)}
    env.pop("ATTN_COURSE_SEED", None)
    notebook = _chapter_copy(tmp_path, PROBE)
    command = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider",
               "--nbval-cell-timeout=600", "-q", str(notebook)]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert {path.name for path in artifacts.iterdir()} == french | german and not french & german
    assert all((artifacts / name).read_bytes() == b"a French model" for name in french)
    assert not log.exists() or log.read_text() == ""
