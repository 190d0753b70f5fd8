"""Tests of attn_course.data.tasks and its grammar (attn_course.data.toy_french): corpora, loader, Vocab,
batches."""

from __future__ import annotations

import collections
import datetime
import random

import pytest
import torch
from torch.utils.data import DataLoader

from attn_course.data import toy_french as tf
from attn_course.data.tasks import (
    DATE_FORMATS,
    MONTHS,
    WEEKDAYS,
    Batch,
    Example,
    TranslationDataset,
    Vocab,
    alignment_matrix,
    bucketed_loader,
    build_vocabs,
    copy_task,
    date_task,
    load_corpus,
    make_batch,
    padding_waste,
    preprocess_fra_eng,
    reverse_task,
    save_corpus,
    sort_task,
    split,
    toy_translation,
)
from attn_course.data.tatoeba import load_fra_eng, sample_path


@pytest.fixture(scope="module")
def corpus() -> list[Example]:
    return toy_translation(1500, seed=11)


# ---------------------------------------------------------------------------------------------- the lexicon
def _forms() -> dict[str, dict[str, set]]:
    """French word → features, from the lexicon (nouns, adjectives, verbs) and the rules (determiners)."""
    nouns, adjectives, verbs = (collections.defaultdict(set) for _ in range(3))
    for n in tf.NOUNS:
        nouns[n.fr].add((n.gender, "sg"))
        nouns[n.fr_pl].add((n.gender, "pl"))
    for a in tf.ADJECTIVES:
        forms = (("m", "sg", a.ms), ("f", "sg", a.fs), ("m", "pl", a.mp), ("f", "pl", a.fp))
        for gender, number, form in (*forms, ("m", "sg", a.ms_vowel)):
            adjectives[form].add((gender, number))
    for v in (*tf.VERBS, tf.BE):
        for person, number in ((1, "sg"), (3, "sg"), (1, "pl"), (2, "pl"), (3, "pl")):
            verbs[v.form(person, number)].add((person, number))
    any_gender = {("m", "pl"), ("f", "pl")}
    determiners = {
        "le": {("m", "sg")}, "la": {("f", "sg")}, "l'": {("m", "sg"), ("f", "sg")}, "les": any_gender,
        "un": {("m", "sg")}, "une": {("f", "sg")}, "des": any_gender,
        "ce": {("m", "sg")}, "cet": {("m", "sg")}, "cette": {("f", "sg")}, "ces": any_gender,
        "mon": {("m", "sg"), ("f", "sg")}, "ma": {("f", "sg")}, "mes": any_gender,
        "son": {("m", "sg"), ("f", "sg")}, "sa": {("f", "sg")}, "ses": any_gender,
        "votre": {("m", "sg"), ("f", "sg")}, "vos": any_gender, "notre": {("m", "sg"), ("f", "sg")},
        "nos": any_gender, "leur": {("m", "sg"), ("f", "sg")}, "leurs": any_gender,
        "deux": any_gender, "trois": any_gender, "au": {("m", "sg")}, "du": {("m", "sg")}, "aux": any_gender,
    }
    return {"noun": nouns, "adj": adjectives, "verb": verbs, "det": determiners}


FORMS = _forms()
SUBJECT_PRONOUNS = {"je": (1, "sg"), "j'": (1, "sg"), "il": (3, "sg"), "elle": (3, "sg"), "nous": (1, "pl"),
                    "vous": (2, "pl"), "ils": (3, "pl")}


def test_lexicon_word_classes_are_disjoint_so_checks_on_tokens_are_unambiguous():
    classes = {name: set(table) for name, table in FORMS.items()}
    classes["other"] = {*tf.ADVERBS.values(), "qui", "que", "qu'", "ne", "n'", "pas", "jamais", "de", "d'",
                        *SUBJECT_PRONOUNS}
    names = list(classes)
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            shared = classes[names[a]] & classes[names[b]]
            assert not shared, f"{names[a]} and {names[b]} share {shared}"


def test_every_french_word_starting_with_h_is_declared_mute():
    words = {w for n in tf.NOUNS for w in (n.fr, n.fr_pl)} | {
        w for a in tf.ADJECTIVES for w in (a.ms, a.fs, a.mp, a.fp)} | {w for v in tf.VERBS for w in v.fr}
    assert {w for w in words if w.startswith("h")} == set(tf.H_MUET)
    assert tf.starts_with_vowel_sound("homme") and tf.starts_with_vowel_sound("œuf")
    assert not tf.starts_with_vowel_sound("chat")


# ---------------------------------------------------------------------------------------------- toy corpus
def test_same_seed_gives_the_same_corpus_and_other_seeds_differ():
    a, b, c = toy_translation(200, seed=3), toy_translation(200, seed=3), toy_translation(200, seed=4)
    assert a == b
    assert a != c
    assert sum(x.src != y.src for x, y in zip(a, c, strict=True)) > 150


def test_generator_leaves_global_random_state_alone():
    random.seed(123)
    state = random.getstate()
    toy_translation(20, seed=0)
    assert random.getstate() == state


@pytest.mark.parametrize(("min_len", "max_len"), [(3, 3), (7, 7), (40, 40), (3, 10), (25, 50), (55, 60)])
def test_source_lengths_respect_min_len_and_max_len_exactly(min_len, max_len):
    lengths = {len(e.src) for e in toy_translation(60, min_len=min_len, max_len=max_len, seed=1)}
    assert min(lengths) >= min_len and max(lengths) <= max_len


def test_lengths_cover_the_whole_range_with_a_fifth_above_30_tokens():
    lengths = [len(e.src) for e in toy_translation(2000, seed=2)]
    assert set(lengths) == set(range(3, 51))
    share = sum(n > 30 for n in lengths) / len(lengths)
    assert 0.3 < share < 0.5  # uniform over 3..50 gives 20/48 ≈ 0.42


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_pairs": -1}, "num_pairs"),
        ({"num_pairs": 2.0}, "num_pairs"),
        ({"num_pairs": 2, "min_len": 0}, "min_len"),
        ({"num_pairs": 2, "min_len": 9, "max_len": 8}, "min_len <= max_len"),
        ({"num_pairs": 2, "min_len": 1, "max_len": 2}, "max_len=2"),
    ],
)
def test_invalid_generator_arguments_raise_value_errors_naming_them(kwargs, message):
    with pytest.raises(ValueError, match=message):
        toy_translation(**kwargs)


def test_zero_pairs_is_an_empty_corpus():
    assert toy_translation(0) == []


def test_every_token_is_linked_and_only_do_support_lacks_a_sure_link(corpus):
    for e in corpus:
        assert e.sure <= e.possible
        sure_src, sure_tgt = {i for i, _ in e.sure}, {j for _, j in e.sure}
        possible_src = {i for i, _ in e.possible}
        assert possible_src == set(range(len(e.src))), e.src
        assert sure_tgt == set(range(len(e.tgt))), e.tgt
        unlinked = {e.src[i] for i in range(len(e.src)) if i not in sure_src}
        assert unlinked <= {"do", "does"}, e.src


def test_do_support_links_only_possibly_to_the_verb_and_to_ne_pas(corpus):
    seen = 0
    for e in corpus:
        for i, word in enumerate(e.src):
            if word in ("do", "does"):
                seen += 1
                targets = sorted(j for a, j in e.possible if a == i)
                assert [e.tgt[j] for j in (targets[0], targets[-1])] in (["ne", "pas"], ["n'", "pas"])
                assert len(targets) == 3 and e.tgt[targets[1]] in FORMS["verb"]
    assert seen > 50


def test_not_and_never_become_discontinuous_ne_pas_and_ne_jamais_around_the_verb(corpus):
    seen = collections.Counter()
    for e in corpus:
        for i, word in enumerate(e.src):
            if word in ("not", "never"):
                seen[word] += 1
                first, last = sorted(j for a, j in e.sure if a == i)
                assert e.tgt[first] in ("ne", "n'")
                assert e.tgt[last] == ("pas" if word == "not" else "jamais")
                assert last == first + 2 and e.tgt[first + 1] in FORMS["verb"]  # ne VERB pas
    assert seen["not"] > 50 and seen["never"] > 50


def test_determiners_and_adjectives_agree_with_their_noun_in_gender_and_number(corpus):
    checked = 0
    for e in corpus:
        t = e.tgt
        for j, word in enumerate(t):
            if word not in FORMS["noun"]:
                continue
            features = set(FORMS["noun"][word])
            k = j - 1
            if t[k] in FORMS["adj"]:  # a pre-nominal adjective: le *petit* chat
                features &= FORMS["adj"][t[k]]
                k -= 1
            if t[k] in FORMS["det"]:
                features &= FORMS["det"][t[k]]
            if j + 1 < len(t) and t[j + 1] in FORMS["adj"]:  # a post-nominal adjective: le chat *noir*
                features &= FORMS["adj"][t[j + 1]]
            assert features, f"{t[max(k, 0):j + 2]} do not agree in {' '.join(t)}"
            checked += 1
    assert checked > 3000


def test_most_adjectives_follow_the_noun_and_petit_grand_beau_precede_it(corpus):
    pre = {f for a in tf.ADJECTIVES if a.position == "pre" for f in (a.ms, a.fs, a.mp, a.fp, a.ms_vowel)}
    post = {f for a in tf.ADJECTIVES if a.position == "post" for f in (a.ms, a.fs, a.mp, a.fp)}
    before = after = 0
    for e in corpus:
        for j, word in enumerate(e.tgt[:-1]):
            nxt = e.tgt[j + 1]
            if nxt in FORMS["noun"] and word in post:
                raise AssertionError(f"post-nominal {word!r} before the noun {nxt!r}: {' '.join(e.tgt)}")
            if word in FORMS["noun"] and nxt in pre:
                raise AssertionError(f"pre-nominal {nxt!r} after the noun {word!r}: {' '.join(e.tgt)}")
            before += word in pre and nxt in FORMS["noun"]
            after += word in FORMS["noun"] and nxt in post
    assert before > 100 and after > 100


def test_subject_pronouns_agree_with_their_verb(corpus):
    checked = 0
    for e in corpus:
        t = e.tgt
        for j, word in enumerate(t[:-2]):
            if word in SUBJECT_PRONOUNS:
                verb = t[j + 2] if t[j + 1] in ("ne", "n'") else t[j + 1]
                assert SUBJECT_PRONOUNS[word] in FORMS["verb"][verb], f"{word} … {verb}: {' '.join(t)}"
                checked += 1
    assert checked > 300


def test_noun_subjects_agree_with_their_verb_and_predicate_adjective(corpus):
    checked = 0
    for e in corpus:
        t = e.tgt
        # A sentence that starts "det [adj] noun [adj] verb": the subject is that noun phrase.
        j = 1 + (t[1] in FORMS["adj"])
        if t[0] not in FORMS["det"] or t[j] not in FORMS["noun"]:
            continue
        gender, number = next(iter(FORMS["noun"][t[j]] & FORMS["det"][t[0]]))
        k = j + 1 + (t[j + 1] in FORMS["adj"])
        k += t[k] in ("ne", "n'")
        if t[k] not in FORMS["verb"]:
            continue  # a relative clause or a complement comes first
        assert (3, number) in FORMS["verb"][t[k]], " ".join(t)
        if t[k] in ("est", "sont"):
            a = k + 1 + (t[k + 1] in ("pas", "jamais", *tf.ADVERBS.values()))
            assert (gender, number) in FORMS["adj"][t[a]], " ".join(t)
        checked += 1
    assert checked > 200


def test_elision_before_a_vowel_or_mute_h_and_only_there(corpus):
    elided = set(tf.ELISIONS.values())
    seen = collections.Counter()
    for e in corpus:
        for word, nxt in zip(e.tgt, e.tgt[1:], strict=False):
            vowel = tf.starts_with_vowel_sound(nxt)
            if word in tf.ELISIONS:
                assert not vowel, f"{word} {nxt} should elide: {' '.join(e.tgt)}"
            if word in elided:
                assert vowel, f"{word}{nxt} should not elide: {' '.join(e.tgt)}"
                seen[word] += 1
    assert all(seen[w] > 5 for w in ("l'", "n'", "qu'", "d'", "j'")), seen


def test_pre_vowel_forms_cet_mon_bel_vieil_nouvel(corpus):
    before_vowel = {"cet", "bel", "vieil", "nouvel"}
    never_before_vowel_noun = {"ce", "ma", "sa", "beau", "nouveau"}  # "il est nouveau ou …" is fine
    seen = collections.Counter()
    for e in corpus:
        for word, nxt in zip(e.tgt, e.tgt[1:], strict=False):
            vowel = tf.starts_with_vowel_sound(nxt)
            masculine_singular_noun = ("m", "sg") in FORMS["noun"].get(nxt, ())
            if word in before_vowel:
                assert vowel, " ".join(e.tgt)
                seen[word] += 1
            if word in never_before_vowel_noun or (word == "vieux" and masculine_singular_noun):
                assert not (vowel and nxt in FORMS["noun"]), " ".join(e.tgt)
            if word in ("mon", "son") and nxt in FORMS["noun"] and ("f", "sg") in FORMS["noun"][nxt]:
                assert vowel, " ".join(e.tgt)  # mon école, not ma école
                seen["mon/son + feminine"] += 1
    assert seen["cet"] and seen["vieil"] and seen["mon/son + feminine"], seen


def test_a_and_de_contract_with_le_and_les_and_the_contraction_links_both_words(corpus):
    seen = collections.Counter()
    for e in corpus:
        for pair in zip(e.tgt, e.tgt[1:], strict=False):
            assert pair not in tf.CONTRACTIONS, " ".join(e.tgt)
        for j, word in enumerate(e.tgt):
            if word in ("au", "aux", "du") or (word == "des" and e.tgt[j - 1] != "pas"):
                sources = {e.src[i] for i, b in e.sure if b == j}
                if word == "des" and sources <= {"some"}:
                    continue  # the indefinite plural article, not de + les
                seen[word] += 1
                assert "the" in sources and sources & {"to", "at", "of", "from", "near"}, (word, sources)
    assert seen["au"] and seen["du"], seen


def test_negated_indefinite_objects_become_de_without_a_relative_clause(corpus):
    seen = collections.Counter()
    for e in corpus:
        for i, j in e.sure:
            if e.src[i] == "any":  # only made for "not/never … any": pas de chiens
                assert e.tgt[j] in ("de", "d'")
            if e.src[i] in ("a", "an", "any") and e.tgt[j] in ("de", "d'"):
                seen[e.src[i]] += 1
                # "ne voit pas d'homme qui soit petit" needs the subjunctive: the grammar never makes it
                for k in range(j + 2, min(j + 4, len(e.tgt))):  # after "de [adj] noun [adj]"
                    relative = e.tgt[k] in ("qui", "que", "qu'") and e.tgt[k - 1] not in ("parce", "pendant")
                    assert not relative, " ".join(e.tgt)
    assert seen["any"] > 10 and seen["a"] > 10, seen


def test_an_english_sentence_always_gets_the_same_french_translation():
    translations = collections.defaultdict(set)
    for e in toy_translation(3000, max_len=8, seed=5):
        translations[tuple(e.src)].add(tuple(e.tgt))
    assert all(len(t) == 1 for t in translations.values())
    assert sum(1 for _ in translations) < 3000  # short sentences repeat, so this was tested


def test_a_and_an_follow_the_next_english_word(corpus):
    for e in corpus:
        for word, nxt in zip(e.src, e.src[1:], strict=False):
            if word in ("a", "an"):
                assert word == ("an" if nxt[0] in "aeiou" else "a"), " ".join(e.src)


def test_alignment_matrix_marks_sure_as_one_and_possible_as_half():
    e = Example(["he", "does", "not", "sleep", "."], ["il", "ne", "dort", "pas", "."],
                {(0, 0), (2, 1), (3, 2), (2, 3), (4, 4)}, {(0, 0), (2, 1), (3, 2), (2, 3), (4, 4), (1, 2)})
    m = alignment_matrix(e)
    assert m.shape == (5, 5)
    assert m[2, 3] == 1.0 and m[2, 1] == 0.5 and m[0, 1] == 0.0 and m.sum() == 5.5


# ---------------------------------------------------------------------------------------------- Example
def test_example_rejects_out_of_range_links_and_sure_outside_possible():
    with pytest.raises(ValueError, match="in range"):
        Example(["a"], ["b"], {(0, 1)}, {(0, 1)})
    with pytest.raises(ValueError, match="sure ⊆ possible"):
        Example(["a"], ["b"], {(0, 0)}, set())
    with pytest.raises(ValueError, match="list of str"):
        Example("a b", ["b"])


# ---------------------------------------------------------------------------------------------- tasks
def test_copy_links_the_diagonal_and_reverse_the_anti_diagonal():
    for e in copy_task(50, min_len=2, max_len=9, vocab_size=5, seed=1):
        n = len(e.src)
        assert 2 <= n <= 9 and e.tgt == e.src and set(e.src) <= {str(i) for i in range(5)}
        assert e.sure == e.possible == {(i, i) for i in range(n)}
    for e in reverse_task(50, seed=1):
        n = len(e.src)
        assert e.tgt == e.src[::-1] and e.sure == {(i, n - 1 - i) for i in range(n)}
        assert all(e.src[i] == e.tgt[j] for i, j in e.sure)


def test_sort_uses_distinct_symbols_and_links_each_to_its_numeric_rank():
    for e in sort_task(50, min_len=5, max_len=15, vocab_size=30, seed=2):
        assert len(set(e.src)) == len(e.src)
        assert [int(t) for t in e.tgt] == sorted(int(t) for t in e.src)
        assert all(e.src[i] == e.tgt[j] for i, j in e.sure) and len(e.sure) == len(e.src)
    with pytest.raises(ValueError, match="distinct"):
        sort_task(1, max_len=21, vocab_size=20)


def test_tasks_are_deterministic_for_a_seed_and_validate_arguments():
    for task in (copy_task, reverse_task, sort_task, date_task):
        assert task(20, seed=4) == task(20, seed=4) != task(20, seed=5)
        with pytest.raises(ValueError, match="num_pairs"):
            task(-1)
    with pytest.raises(ValueError, match="vocab_size"):
        copy_task(2, vocab_size=0)
    with pytest.raises(ValueError, match="formats"):
        date_task(2, formats=["next tuesday"])


def test_dates_become_iso_digits_linked_field_by_field():
    examples = date_task(400, seed=3)
    formats_seen = set()
    for e in examples:
        iso = "".join(e.tgt)
        date = datetime.date.fromisoformat(iso)
        assert e.tgt == list(iso) and len(e.tgt) == 10
        fields = collections.defaultdict(set)
        for i, j in e.sure:
            fields[i].add(j)
        assert {j for js in fields.values() for j in js} == {0, 1, 2, 3, 5, 6, 8, 9}  # "-" unaligned
        for i, targets in fields.items():
            word = e.src[i]
            if targets == {0, 1, 2, 3}:
                assert word == str(date.year)
            elif targets == {5, 6}:
                assert word in (str(date.month), f"{date.month:02d}", MONTHS[date.month - 1],
                                MONTHS[date.month - 1][:3])
            else:
                assert targets == {8, 9} and word.rstrip("stndrh") in (str(date.day), f"{date.day:02d}")
        for i, word in enumerate(e.src):
            if i not in fields:
                assert word in (",", "/", ".", "-", "of", "the") or word == WEEKDAYS[date.weekday()]
        formats_seen.add(tuple(_date_token_kind(w) for w in e.src))
    assert len(formats_seen) == len(DATE_FORMATS)


def _date_token_kind(word: str) -> str:
    if word.isdigit():
        return "year" if len(word) == 4 else "number"
    if word[0].isdigit():
        return "ordinal"
    if word in MONTHS or word in WEEKDAYS:
        return "month" if word in MONTHS else "weekday"
    return "mon" if word in {m[:3] for m in MONTHS} else word


def test_slashed_dates_are_day_month_year():
    (e,) = date_task(1, formats=["05/03/2021"], seed=0)
    day, _, month, _, year = e.src
    assert "".join(e.tgt) == f"{year}-{month}-{day}"


# ---------------------------------------------------------------------------------------------- fra-eng
def _write(path, text: str, encoding: str = "utf-8"):
    path.write_bytes(text.encode(encoding))
    return path


def test_loader_reads_the_two_column_file_with_d2l_preprocessing(tmp_path):
    f = _write(tmp_path / "fra.txt", "Go.\tVa !\nHi.\tSalut !\nI won!\tJ'ai gagné !\n")
    examples = load_fra_eng(f)
    assert [(e.src, e.tgt) for e in examples] == [
        (["go", "."], ["va", "!"]),
        (["hi", "."], ["salut", "!"]),
        (["i", "won", "!"], ["j'ai", "gagné", "!"]),  # d2l's tokens: split on spaces only
    ]
    assert all(e.sure == e.possible == set() for e in examples)


def test_loader_reads_the_three_column_file_that_d2l_drops(tmp_path):
    attribution = "CC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM) & #1158250 (Wittydev)"
    f = _write(tmp_path / "fra.txt", f"Go.\tVa !\t{attribution}\nWho?\tQui ?\t{attribution}\n")
    pairs = [(e.src, e.tgt) for e in load_fra_eng(f)]
    assert pairs == [(["go", "."], ["va", "!"]), (["who", "?"], ["qui", "?"])]


def test_loader_handles_non_breaking_spaces_accents_bom_crlf_and_blank_lines(tmp_path):
    text = "\ufeffHow are you?\tÇa va\u202f?\r\nWait,\u00a0please.\tAttendez, s'il vous plaît.\r\n\r\n\n"
    examples = load_fra_eng(_write(tmp_path / "fra.txt", text))
    assert [(e.src, e.tgt) for e in examples] == [
        (["how", "are", "you", "?"], ["ça", "va", "?"]),
        (["wait", ",", "please", "."], ["attendez", ",", "s'il", "vous", "plaît", "."]),
    ]


def test_preprocessing_lowercases_and_spaces_punctuation_as_d2l_does():
    assert preprocess_fra_eng("Hello,World.\u202fOK!") == "hello ,world . ok !"
    assert preprocess_fra_eng(".Start") == ".start"  # d2l adds no space before a leading mark


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("Go.\tVa !\nHello there\n", 2, "got 1"),
        ("Go.\tVa !\tx\ty\n", 1, "got 4"),
        ("Go.\tVa !\n\t Salut\n", 2, "English"),
    ],
)
def test_a_malformed_line_is_an_error_naming_its_line_number(tmp_path, text, line, message):
    f = _write(tmp_path / "fra.txt", text)
    with pytest.raises(ValueError, match=rf"line {line}\b.*{message}"):
        load_fra_eng(f)


def test_loader_stops_after_num_pairs_and_accepts_a_folder(tmp_path):
    _write(tmp_path / "fra.txt", "".join(f"Go {k}.\tVa {k} !\n" for k in range(10)) + "broken line\n")
    assert [e.src for e in load_fra_eng(tmp_path, num_pairs=3)] == [["go", "0", "."], ["go", "1", "."],
                                                                    ["go", "2", "."]]
    assert load_fra_eng(tmp_path, num_pairs=0) == []
    with pytest.raises(ValueError, match="num_pairs"):
        load_fra_eng(tmp_path, num_pairs=-2)


def test_a_missing_file_says_where_to_get_it(tmp_path):
    where = r"(?s)nowhere/fra\.txt does not exist.*manythings\.org/anki.*fra-eng\.zip.*fetch"
    with pytest.raises(FileNotFoundError, match=where):
        load_fra_eng(tmp_path / "nowhere" / "fra.txt")


def test_by_default_the_loader_reads_the_pairs_that_ship_with_the_course():
    pairs = load_fra_eng(num_pairs=3)
    assert [e.src for e in pairs] == [e.src for e in load_fra_eng(sample_path(), num_pairs=3)]
    assert all(e.src and e.tgt for e in pairs)


# ---------------------------------------------------------------------------------------------- Vocab
def test_vocab_specials_come_first_pad_is_zero_and_unknowns_map_to_unk():
    vocab = Vocab([["le", "chat"], ["le", "chien"]])
    assert (vocab.pad, vocab.bos, vocab.eos, vocab.unk) == (0, 1, 2, 3)
    assert vocab.to_tokens([0, 1, 2, 3]) == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert vocab["zèbre"] == vocab.unk and "zèbre" not in vocab and "chat" in vocab
    assert len(vocab) == 7


def test_vocab_orders_by_frequency_then_alphabetically_after_reserved_tokens():
    vocab = Vocab(["b", "c", "a", "c", "b", "c", "d"], reserved_tokens=["<sep>", "<pad>"])
    assert vocab.idx_to_token == ["<pad>", "<bos>", "<eos>", "<unk>", "<sep>", "c", "b", "a", "d"]
    assert vocab.token_freqs[:2] == [("c", 3), ("b", 2)]


def test_vocab_min_freq_drops_rare_tokens():
    vocab = Vocab(["a", "a", "b", "c", "c", "c"], min_freq=2)
    assert "b" not in vocab and vocab["b"] == vocab.unk and vocab.to_tokens(vocab[["a", "c"]]) == ["a", "c"]


def test_vocab_maps_lists_and_round_trips_through_to_tokens():
    vocab = Vocab([["il", "dort", "."], ["elle", "dort", "."]])
    ids = vocab[["il", "dort", "."]]
    assert isinstance(ids, list) and vocab.to_tokens(ids) == ["il", "dort", "."]
    assert vocab[[["il"], ["elle", "dort"]]] == [[vocab["il"]], [vocab["elle"], vocab["dort"]]]
    assert vocab.to_tokens(vocab["il"]) == "il"
    assert vocab.to_tokens([vocab["il"]]) == ["il"]  # d2l returns a str for a list of one index
    assert vocab.to_tokens(torch.tensor(ids)) == ["il", "dort", "."]
    assert vocab.to_tokens(torch.tensor([ids, ids])) == [["il", "dort", "."]] * 2
    with pytest.raises(ValueError, match="out of range"):
        vocab.to_tokens(len(vocab))
    for row in ([0, len(vocab)], [-1, 0], [[0], [len(vocab) + 1]], torch.tensor([1, len(vocab)])):
        with pytest.raises(ValueError, match=r"index (-1|\d+) is out of range for a vocabulary of \d+"):
            vocab.to_tokens(row)        # never Python's negative indexing, never an IndexError
    assert vocab.to_tokens([]) == [] and vocab.to_tokens([True]) == ["<bos>"]


def test_vocab_decode_stops_at_eos_and_drops_bos_and_pad():
    vocab = Vocab(["il", "dort"])
    ids = [vocab.bos, vocab["il"], vocab["dort"], vocab.eos, vocab["il"], vocab.pad]
    assert vocab.decode(torch.tensor(ids)) == ["il", "dort"]


def test_vocab_rejects_bad_input():
    with pytest.raises(ValueError, match="min_freq"):
        Vocab(["a"], min_freq=-1)
    with pytest.raises(ValueError, match="str"):
        Vocab([["a"], 3])
    with pytest.raises(ValueError, match="one str"):
        Vocab("abc")


# ---------------------------------------------------------------------------------------------- batches
@pytest.fixture(scope="module")
def dataset(corpus) -> TranslationDataset:
    src_vocab, tgt_vocab = build_vocabs(corpus)
    return TranslationDataset(corpus[:400], src_vocab, tgt_vocab)


def test_batch_holds_eos_terminated_sources_and_shifted_targets(corpus, dataset):
    sv, tv = dataset.src_vocab, dataset.tgt_vocab
    examples = corpus[:5]
    batch = make_batch(examples, sv, tv)
    n_src, n_tgt = max(len(e.src) for e in examples) + 1, max(len(e.tgt) for e in examples) + 1
    assert batch.src.shape == (5, n_src) and batch.tgt_in.shape == batch.tgt_out.shape == (5, n_tgt)
    assert all(t.dtype == torch.long for t in batch)
    assert batch.src_valid_lens.tolist() == [len(e.src) + 1 for e in examples]
    assert batch.tgt_valid_lens.tolist() == [len(e.tgt) + 1 for e in examples]
    assert batch.index.tolist() == list(range(5))
    for b, e in enumerate(examples):
        s, t = len(e.src), len(e.tgt)
        assert sv.to_tokens(batch.src[b, :s]) == e.src and batch.src[b, s] == sv.eos
        assert (batch.src[b, s + 1:] == sv.pad).all()
        assert batch.tgt_in[b, 0] == tv.bos and tv.to_tokens(batch.tgt_in[b, 1:t + 1]) == e.tgt
        assert tv.to_tokens(batch.tgt_out[b, :t]) == e.tgt and batch.tgt_out[b, t] == tv.eos
        assert (batch.tgt_in[b, t + 1:] == tv.pad).all() and (batch.tgt_out[b, t + 1:] == tv.pad).all()


def test_batch_moves_to_a_device_and_rejects_an_empty_batch(dataset, device):
    batch = dataset.collate([dataset[0], dataset[3]]).to(device)
    assert isinstance(batch, Batch) and all(t.device.type == device.type for t in batch)
    assert batch.index.tolist() == [0, 3]
    with pytest.raises(ValueError, match="0 examples"):
        dataset.collate([])


def test_bucketed_loader_yields_every_example_exactly_once_per_epoch(dataset):
    for shuffle in (True, False):
        for drop_last in (False, True):
            loader = bucketed_loader(dataset, 32, shuffle=shuffle, seed=0, pool_size=4, drop_last=drop_last)
            for _ in range(2):
                batches = list(loader)
                seen = torch.cat([b.index for b in batches]).tolist()
                assert len(batches) == len(loader)
                assert len(seen) == len(set(seen))
                assert len(seen) == (400 // 32 * 32 if drop_last else 400)


def test_bucketed_loader_is_deterministic_for_a_seed_and_reshuffles_each_epoch(dataset):
    def order(loader):
        return [b.index.tolist() for b in loader]

    a, b = bucketed_loader(dataset, 16, seed=7), bucketed_loader(dataset, 16, seed=7)
    first = order(a)
    assert first == order(b)
    assert order(a) != first  # the next epoch
    assert order(bucketed_loader(dataset, 16, seed=8)) != first


def test_bucketing_wastes_far_less_padding_than_random_batches(dataset):
    bucketed = padding_waste(bucketed_loader(dataset, 16, seed=0))
    random_batches = padding_waste(DataLoader(dataset, 16, shuffle=True, collate_fn=dataset.collate))
    assert bucketed < 0.5 * random_batches


def test_unshuffled_loader_batches_by_increasing_length(dataset):
    lengths = [int(b.src_valid_lens.max()) for b in bucketed_loader(dataset, 50, shuffle=False)]
    assert lengths == sorted(lengths)


def test_loader_rejects_bad_batch_size(dataset):
    with pytest.raises(ValueError, match="batch_size"):
        bucketed_loader(dataset, 0)


# ---------------------------------------------------------------------------------------------- splits, files
def test_splits_share_no_source_sentence_and_keep_every_distinct_pair(corpus):
    examples = corpus + corpus[:100]  # exact duplicates
    examples += [Example(e.src, e.tgt + ["!"]) for e in corpus[100:150]]  # second translations
    parts = split(examples, (0.8, 0.1, 0.1), seed=0)
    sources = [{tuple(e.src) for e in part} for part in parts]
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])
    distinct = {(tuple(e.src), tuple(e.tgt)) for e in examples}
    kept = [(tuple(e.src), tuple(e.tgt)) for part in parts for e in part]
    assert len(kept) == len(set(kept)) == len(distinct)
    groups = len({tuple(e.src) for e in examples})
    assert abs(len(sources[1]) - 0.1 * groups) <= 1 and abs(len(sources[2]) - 0.1 * groups) <= 1
    assert split(examples, seed=0) == parts and split(examples, seed=1) != parts


def test_split_rejects_fractions_that_do_not_sum_to_one():
    with pytest.raises(ValueError, match="fractions"):
        split([], (0.8, 0.1, 0.2))
    with pytest.raises(ValueError, match="fractions"):
        split([], (0.9, 0.1))


def test_saved_corpus_loads_back_identical(tmp_path, corpus):
    examples = corpus[:50] + date_task(5) + [Example(["ça", "va", "?"], ["how", "are", "you", "?"])]
    path = tmp_path / "corpus.jsonl"
    save_corpus(examples, path)
    assert load_corpus(path) == examples


def test_loading_a_damaged_corpus_names_the_line(tmp_path):
    path = tmp_path / "corpus.jsonl"
    save_corpus(toy_translation(3), path)
    path.write_text(path.read_text(encoding="utf-8") + '{"src": ["a"]}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 4"):
        load_corpus(path)
