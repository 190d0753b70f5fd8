"""A small English→French grammar that knows its own word alignments: the course's offline translation corpus.

Every sentence pair is built from one tree rendered twice, so each French word knows which English words it
translates. The grammar is small, but the French is real: determiners and adjectives agree with their noun in
gender and number, le/la/de/ne/que/je elide before a vowel (l'oiseau, n'aime, qu'il, j'ai), ce/ma/sa/beau/
vieux/nouveau take their pre-vowel forms (cet oiseau, mon école, un vieil homme), à/de + le/les contract
(au, aux, du, des), most adjectives follow the noun while petit, grand, beau, joli, bon, jeune, vieux and
nouveau precede it, verbs agree with their subject (present tense, irregular verbs included), negation is
discontinuous (does not like → ne … pas), indefinite objects of a negated verb become de (n'a pas de chien),
des becomes de before a preceding adjective (de petits chats), frequency adverbs follow the verb (often sleeps
→ dort souvent), and relative clauses (qui/que), conjunctions and prepositional phrases make long sentences.
Each English sentence has exactly one French translation (you → vous, they → ils), so a perfect model exists.

Tokens are lower-case, as after d2l's preprocessing; "." and "," are tokens; an elided word is its own token
("l'" "oiseau"), as the Moses tokenizer splits French.

Gold links, (src_index, tgt_index), follow the Och & Ney (2000) convention: *sure* links where the
correspondence is certain, *possible* links (a superset) where an annotator could go either way.
- Nouns, verbs, adjectives, determiners, pronouns, adverbs, prepositions, conjunctions, "." and ",": sure.
- Phrases translated as a whole link every word to every word, sure: near ↔ près de, in front of ↔ devant,
  because ↔ parce que, while ↔ pendant que.
- not ↔ ne and not ↔ pas, never ↔ ne and never ↔ jamais: sure (one English word, two discontinuous French).
- A contraction carries the links of both its parts, sure: of the ↔ du, to the ↔ au, near the ↔ près du.
- The negative partitive de (n'a pas de chien) is sure to the English a/some it replaces.
- do/does (do-support) has no French word of its own: possible links to the French verb, ne and pas only.
So every token on both sides has a possible link, and every token except do/does has a sure link.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

HUMAN, ANIMAL, FOOD, READABLE, THING, PLACE = "human", "animal", "food", "readable", "thing", "place"
KINDS = (HUMAN, ANIMAL, FOOD, READABLE, THING, PLACE)
ANIMATE = frozenset({HUMAN, ANIMAL})
EVERYTHING = frozenset(KINDS)


@dataclass(frozen=True)
class Noun:
    """A noun: English singular/plural, French singular/plural, French gender ("m"/"f"), semantic kind."""

    en: str
    en_pl: str
    fr: str
    fr_pl: str
    gender: str
    kind: str


@dataclass(frozen=True)
class Adjective:
    """An adjective: French forms (m.sg, f.sg, m.pl, f.pl, m.sg before a vowel), position, English order rank.

    `position` is "pre" (before the French noun: petit chat) or "post" (chat noir). `en_rank` orders English
    adjectives (state/opinion < size < condition < age < colour): "a tired old man" → "un vieil homme
    fatigué".
    """

    en: str
    ms: str
    fs: str
    mp: str
    fp: str
    ms_vowel: str
    position: str
    en_rank: float
    kinds: frozenset

    def form(self, gender: str, number: str, before_vowel: bool = False) -> str:
        if number == "pl":
            return self.mp if gender == "m" else self.fp
        if gender == "f":
            return self.fs
        return self.ms_vowel if before_vowel else self.ms


@dataclass(frozen=True)
class Verb:
    """A verb: English base and 3rd-singular forms, French present tense (je, il/elle, nous, vous, ils/elles).

    `objects` is None for an intransitive verb, else the kinds (or English nouns) it takes as direct object.
    `complement` is an obligatory prepositional phrase (go *to* the park → va *au* parc): (en, fr, kinds).
    """

    en: str
    en_3sg: str
    infinitive: str
    fr: tuple
    subjects: frozenset
    objects: frozenset | None = None
    complement: tuple | None = None

    def form(self, person: int, number: str) -> str:
        """French present-tense form for a subject of this person (1, 2, 3) and number ("sg", "pl")."""
        return self.fr[_PERSON_SLOT[(person, number)]]

    def takes(self, noun: Noun) -> bool:
        return self.objects is not None and (noun.kind in self.objects or noun.en in self.objects)


_PERSON_SLOT = {(1, "sg"): 0, (3, "sg"): 1, (1, "pl"): 2, (2, "pl"): 3, (3, "pl"): 4}


def _nouns(table: str) -> tuple[Noun, ...]:
    out = []
    for line in table.strip().splitlines():
        en, en_pl, fr, fr_pl, gender, kind = line.split()
        out.append(Noun(en, en_pl, fr, fr_pl, gender, kind))
    return tuple(out)


NOUNS = _nouns("""
woman women femme femmes f human
man men homme hommes m human
child children enfant enfants m human
girl girls fille filles f human
boy boys garçon garçons m human
friend friends ami amis m human
teacher teachers professeur professeurs m human
student students étudiant étudiants m human
doctor doctors médecin médecins m human
sister sisters sœur sœurs f human
mother mothers mère mères f human
queen queens reine reines f human
king kings roi rois m human
cat cats chat chats m animal
dog dogs chien chiens m animal
bird birds oiseau oiseaux m animal
horse horses cheval chevaux m animal
mouse mice souris souris f animal
cow cows vache vaches f animal
owl owls chouette chouettes f animal
elephant elephants éléphant éléphants m animal
duck ducks canard canards m animal
apple apples pomme pommes f food
cake cakes gâteau gâteaux m food
sandwich sandwiches sandwich sandwichs m food
orange oranges orange oranges f food
egg eggs œuf œufs m food
soup soups soupe soupes f food
cheese cheeses fromage fromages m food
book books livre livres m readable
letter letters lettre lettres f readable
newspaper newspapers journal journaux m readable
car cars voiture voitures f thing
ball balls ballon ballons m thing
hat hats chapeau chapeaux m thing
key keys clé clés f thing
chair chairs chaise chaises f thing
table tables table tables f thing
door doors porte portes f thing
window windows fenêtre fenêtres f thing
flower flowers fleur fleurs f thing
umbrella umbrellas parapluie parapluies m thing
photo photos photo photos f thing
bike bikes vélo vélos m thing
house houses maison maisons f place
garden gardens jardin jardins m place
school schools école écoles f place
city cities ville villes f place
park parks parc parcs m place
river rivers rivière rivières f place
hotel hotels hôtel hôtels m place
island islands île îles f place
kitchen kitchens cuisine cuisines f place
forest forests forêt forêts f place
street streets rue rues f place
station stations gare gares f place
library libraries bibliothèque bibliothèques f place
church churches église églises f place
office offices bureau bureaux m place
""")


def _adjectives(table: str) -> tuple[Adjective, ...]:
    out = []
    for line in table.strip().splitlines():
        en, ms, fs, mp, fp, ms_vowel, position, rank, kinds = line.split()
        kinds = frozenset(kinds.split(","))
        out.append(Adjective(en, ms, fs, mp, fp, ms_vowel, position, float(rank), kinds))
    return tuple(out)


_ALL = ",".join(KINDS)
ADJECTIVES = _adjectives(f"""
beautiful beau belle beaux belles bel pre 1 {_ALL}
pretty joli jolie jolis jolies joli pre 1 human,animal,thing,place
good bon bonne bons bonnes bon pre 1 human,food,readable
small petit petite petits petites petit pre 2 {_ALL}
big grand grande grands grandes grand pre 2 {_ALL}
young jeune jeune jeunes jeunes jeune pre 3 human,animal
old vieux vieille vieux vieilles vieil pre 3 human,animal,readable,thing,place
new nouveau nouvelle nouveaux nouvelles nouvel pre 3 human,readable,thing,place
happy heureux heureuse heureux heureuses heureux post 0 human,animal
sad triste triste tristes tristes triste post 0 human,animal
tired fatigué fatiguée fatigués fatiguées fatigué post 0 human,animal
intelligent intelligent intelligente intelligents intelligentes intelligent post 0 human,animal
famous célèbre célèbre célèbres célèbres célèbre post 0 human,readable,place
delicious délicieux délicieuse délicieux délicieuses délicieux post 0 food
quiet calme calme calmes calmes calme post 0 human,animal,place
clean propre propre propres propres propre post 2.5 thing,place
empty vide vide vides vides vide post 2.5 place,thing
cold froid froide froids froides froid post 2.5 food,place
black noir noire noirs noires noir post 4 animal,thing
white blanc blanche blancs blanches blanc post 4 animal,thing,place
grey gris grise gris grises gris post 4 animal,thing
red rouge rouge rouges rouges rouge post 4 thing,food
green vert verte verts vertes vert post 4 thing,food
blue bleu bleue bleus bleues bleu post 4 thing
""")


def _v(en, en_3sg, infinitive, forms, subjects, objects=None, complement=None) -> Verb:
    return Verb(en, en_3sg, infinitive, tuple(forms.split()), frozenset(subjects),
                None if objects is None else frozenset(objects), complement)


_THINGS = (FOOD, READABLE, THING)
VERBS = (
    # intransitive
    _v("sleep", "sleeps", "dormir", "dors dort dormons dormez dorment", ANIMATE),
    _v("run", "runs", "courir", "cours court courons courez courent", ANIMATE),
    _v("sing", "sings", "chanter", "chante chante chantons chantez chantent", {HUMAN}),
    _v("work", "works", "travailler", "travaille travaille travaillons travaillez travaillent", {HUMAN}),
    _v("play", "plays", "jouer", "joue joue jouons jouez jouent", ANIMATE),
    _v("wait", "waits", "attendre", "attends attend attendons attendez attendent", ANIMATE),
    _v("laugh", "laughs", "rire", "ris rit rions riez rient", {HUMAN}),
    _v("cry", "cries", "pleurer", "pleure pleure pleurons pleurez pleurent", {HUMAN}),
    _v("swim", "swims", "nager", "nage nage nageons nagez nagent", ANIMATE),
    # intransitive with an obligatory prepositional complement
    _v("go", "goes", "aller", "vais va allons allez vont", ANIMATE, complement=("to", "à", {PLACE})),
    _v("come", "comes", "venir", "viens vient venons venez viennent", ANIMATE,
       complement=("from", "de", {PLACE})),
    _v("arrive", "arrives", "arriver", "arrive arrive arrivons arrivez arrivent", {HUMAN},
       complement=("at", "à", {PLACE})),
    # transitive
    _v("like", "likes", "aimer", "aime aime aimons aimez aiment", ANIMATE, EVERYTHING),
    _v("see", "sees", "voir", "vois voit voyons voyez voient", ANIMATE, EVERYTHING),
    _v("watch", "watches", "regarder", "regarde regarde regardons regardez regardent", ANIMATE, EVERYTHING),
    _v("eat", "eats", "manger", "mange mange mangeons mangez mangent", ANIMATE, {FOOD}),
    _v("buy", "buys", "acheter", "achète achète achetons achetez achètent", {HUMAN}, _THINGS),
    _v("take", "takes", "prendre", "prends prend prenons prenez prennent", {HUMAN}, _THINGS),
    _v("find", "finds", "trouver", "trouve trouve trouvons trouvez trouvent", ANIMATE, (*_THINGS, ANIMAL)),
    _v("want", "wants", "vouloir", "veux veut voulons voulez veulent", ANIMATE, _THINGS),
    _v("have", "has", "avoir", "ai a avons avez ont", {HUMAN}, EVERYTHING),
    _v("read", "reads", "lire", "lis lit lisons lisez lisent", {HUMAN}, {READABLE}),
    _v("write", "writes", "écrire", "écris écrit écrivons écrivez écrivent", {HUMAN}, {READABLE}),
    _v("open", "opens", "ouvrir", "ouvre ouvre ouvrons ouvrez ouvrent", {HUMAN},
       {READABLE, "door", "window", "umbrella", "car"}),
    _v("know", "knows", "connaître", "connais connaît connaissons connaissez connaissent", {HUMAN},
       {HUMAN, ANIMAL, PLACE}),
    _v("follow", "follows", "suivre", "suis suit suivons suivez suivent", ANIMATE, ANIMATE),
    _v("call", "calls", "appeler", "appelle appelle appelons appelez appellent", {HUMAN}, ANIMATE),
    _v("help", "helps", "aider", "aide aide aidons aidez aident", ANIMATE, ANIMATE),
    _v("hear", "hears", "entendre", "entends entend entendons entendez entendent", ANIMATE, ANIMATE),
    _v("visit", "visits", "visiter", "visite visite visitons visitez visitent", {HUMAN}, {PLACE}),
    _v("draw", "draws", "dessiner", "dessine dessine dessinons dessinez dessinent", {HUMAN},
       (ANIMAL, FOOD, THING, PLACE)),
    _v("wash", "washes", "laver", "lave lave lavons lavez lavent", {HUMAN}, (ANIMAL, THING)),
)
BE = _v("be", "is", "être", "suis est sommes êtes sont", EVERYTHING)
_BE_EN = {(1, "sg"): "am", (3, "sg"): "is", (1, "pl"): "are", (2, "pl"): "are", (3, "pl"): "are"}


@dataclass(frozen=True)
class Pronoun:
    """A subject pronoun: English, French, person, number, and the gender a predicate adjective takes."""

    en: str
    fr: str
    person: int
    number: str
    gender: str


PRONOUNS = (
    Pronoun("i", "je", 1, "sg", "m"),
    Pronoun("you", "vous", 2, "pl", "m"),
    Pronoun("he", "il", 3, "sg", "m"),
    Pronoun("she", "elle", 3, "sg", "f"),
    Pronoun("we", "nous", 1, "pl", "m"),
    Pronoun("they", "ils", 3, "pl", "m"),
)
# Only 3rd-person pronouns take a predicate adjective: "i am tired" could be fatigué or fatiguée.
_PREDICATE_PRONOUNS = tuple(p for p in PRONOUNS if p.person == 3)

# key: (English singular, English plural, French m.sg, f.sg, pl, m.sg before a vowel, f.sg before a vowel).
# None for a number the determiner does not have. "a" in the plural is English "some", French des.
DETERMINERS = {
    "the": ("the", "the", "le", "la", "les", "l'", "l'"),
    "a": ("a", "some", "un", "une", "des", "un", "une"),
    "this": ("this", "these", "ce", "cette", "ces", "cet", "cette"),
    "my": ("my", "my", "mon", "ma", "mes", "mon", "mon"),
    "your": ("your", "your", "votre", "votre", "vos", "votre", "votre"),
    "his": ("his", "his", "son", "sa", "ses", "son", "son"),
    "her": ("her", "her", "son", "sa", "ses", "son", "son"),
    "our": ("our", "our", "notre", "notre", "nos", "notre", "notre"),
    "their": ("their", "their", "leur", "leur", "leurs", "leur", "leur"),
    "two": (None, "two", None, None, "deux", None, None),
    "three": (None, "three", None, None, "trois", None, None),
}
_DET_KEYS = tuple(DETERMINERS)
_DET_WEIGHTS = (45, 22, 7, 5, 3, 3, 3, 2, 3, 4, 3)
ADVERBS = {"often": "souvent", "always": "toujours", "sometimes": "parfois"}
# English words → French words; every English word links (sure) to every French word of the phrase.
PREPOSITIONS = {
    "in": (("in",), ("dans",), frozenset({PLACE})),
    "on": (("on",), ("sur",), frozenset({THING})),
    "under": (("under",), ("sous",), frozenset({THING})),
    "near": (("near",), ("près", "de"), frozenset({PLACE, THING, HUMAN, ANIMAL})),
    "behind": (("behind",), ("derrière",), frozenset({PLACE, THING, HUMAN, ANIMAL})),
    "in front of": (("in", "front", "of"), ("devant",), frozenset({PLACE, THING, HUMAN, ANIMAL})),
    "with": (("with",), ("avec",), ANIMATE),
    "for": (("for",), ("pour",), frozenset({HUMAN})),
}
CONJUNCTIONS = {
    "and": (("and",), ("et",)),
    "but": ((",", "but"), (",", "mais")),
    "or": (("or",), ("ou",)),
    "because": (("because",), ("parce", "que")),
    "while": (("while",), ("pendant", "que")),
    "when": (("when",), ("quand",)),
}
_CONJ_KEYS = tuple(CONJUNCTIONS)
_CONJ_WEIGHTS = (40, 20, 5, 15, 10, 10)

# Words that elide their final e before a vowel sound, and their elided token.
ELISIONS = {"le": "l'", "la": "l'", "de": "d'", "ne": "n'", "que": "qu'", "je": "j'"}
# Every French word of the lexicon that starts with h starts with a mute h (l'homme, l'hôtel).
H_MUET = frozenset({"homme", "hommes", "hôtel", "hôtels", "heureux", "heureuse", "heureuses"})
_VOWELS = frozenset("aeiouyàâäéèêëîïôöùûüœæ")
# Contractions of à/de with the definite article.
CONTRACTIONS = {("à", "le"): "au", ("à", "les"): "aux", ("de", "le"): "du", ("de", "les"): "des"}


def starts_with_vowel_sound(word: str) -> bool:
    """True if a French word makes the word before it elide: a vowel, or a mute h (l'homme)."""
    return word[0] in _VOWELS or word in H_MUET


def _en_article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


_INTRANSITIVE = tuple(v for v in VERBS if v.objects is None and v.complement is None)
_MOTION = tuple(v for v in VERBS if v.complement is not None)
_TRANSITIVE = tuple(v for v in VERBS if v.objects is not None)
_HUMAN_VERBS = {
    group: tuple(v for v in verbs if HUMAN in v.subjects)
    for group, verbs in (("intr", _INTRANSITIVE), ("motion", _MOTION), ("trans", _TRANSITIVE))
}
_NOUN_VERBS = {"intr": _INTRANSITIVE, "motion": _MOTION, "trans": _TRANSITIVE}
# Candidate lists, computed once from the tables above (constants, not caches).
_SUBJECT_NOUNS = {v.en: tuple(n for n in NOUNS if n.kind in v.subjects) for v in (*VERBS, BE)}
_OBJECT_NOUNS = {v.en: tuple(n for n in NOUNS if v.takes(n)) for v in _TRANSITIVE}
_COMPLEMENT_NOUNS = {v.en: tuple(n for n in NOUNS if n.kind in v.complement[2]) for v in _MOTION}
_PREP_NOUNS = {prep: tuple(n for n in NOUNS if n.kind in row[2]) for prep, row in PREPOSITIONS.items()}
_OBJECT_VERBS = {n.en: tuple(v for v in _TRANSITIVE if v.takes(n)) for n in NOUNS}
_ADVERB_KEYS = tuple(ADVERBS)
_POSSESSOR_NOUNS = tuple(n for n in NOUNS if n.kind in (HUMAN, PLACE))
_HUMAN_NOUNS = tuple(n for n in NOUNS if n.kind == HUMAN)
_POSSESSIVES = frozenset({"my", "your", "his", "her", "our", "their"})
_ADJECTIVES_FOR = {
    (kind, position): tuple(a for a in ADJECTIVES if kind in a.kinds and position in ("any", a.position))
    for kind in KINDS
    for position in ("pre", "post", "any")
}


# ----------------------------------------------------------------------------------------------- the tree
class _NP:
    """A noun phrase: determiner, at most one adjective on each side of the French noun, an optional "of"
    complement and an optional relative clause. `role`: "top", "of" or "inner" (inside a relative clause)."""

    __slots__ = ("noun", "number", "det", "pre", "post", "of", "rel", "role", "avoid", "object_of")

    def __init__(self, noun: Noun, number: str, det: str, role: str):
        self.noun, self.number, self.det, self.role = noun, number, det, role
        self.pre = self.post = self.of = self.rel = None
        self.avoid = None  # the predicate adjective of this subject: "the black cat is black" is not made
        self.object_of = None  # the main clause this NP is the direct object of


class _Clause:
    """Subject, verb and arguments. A relative clause leaves its subject or object slot to the antecedent."""

    __slots__ = ("subj", "verb", "obj", "comp", "adj", "pps", "neg", "adv", "rel_kind")

    def __init__(self, subj, verb: Verb, rel_kind: str | None = None):
        self.subj, self.verb, self.rel_kind = subj, verb, rel_kind  # rel_kind: None, "subj" or "obj"
        self.obj = self.comp = self.adj = self.neg = self.adv = None
        self.pps = []


# ----------------------------------------------------------------------------------------------- growing
class _Grower:
    """Grows one sentence tree until its English side has `target` tokens (or as close as it can), then stops.

    Growth starts from one minimal clause and applies random moves that each add a known number of English
    tokens (a clause, a prepositional phrase, a relative clause, an "of" complement, an adjective, a negation,
    an adverb), never more than the room left, so most sentences hit the target length exactly.
    """

    def __init__(self, rng: random.Random, target: int):
        self.rng, self.target = rng, target
        self.clauses: list[_Clause] = []
        self.conjs: list[str] = []
        self.nps: list[_NP] = []
        self.rels: list[_Clause] = []
        self.length = 1  # the final "."

    # -- building blocks
    def _np(self, nouns: tuple, role: str, *, allow_some: bool = True, exclude=()) -> _NP:
        rng = self.rng
        noun = rng.choice(nouns)
        if noun in exclude:  # "the dog sees the dog": draw again among the others
            noun = rng.choice([n for n in nouns if n not in exclude] or nouns)
        det = rng.choices(_DET_KEYS, _DET_WEIGHTS)[0]
        if det == "a" and not allow_some:  # à/de + des would need another rule: keep "a" singular there
            number = "sg"
        elif det in ("two", "three"):
            number = "pl"
        else:
            number = "pl" if rng.random() < 0.35 else "sg"
        np = _NP(noun, number, det, role)
        self.nps.append(np)
        return np

    def _new_clause(self, budget: int) -> tuple[_Clause, int] | None:
        """A minimal clause of at most `budget` English tokens, and its length (None if nothing fits)."""
        rng = self.rng
        templates = [t for t in _TEMPLATES if t[1] <= budget]
        if not templates:
            return None
        name, cost, _ = rng.choices(templates, [t[2] for t in templates])[0]
        pronoun = name.startswith("pron")
        group = name.split("_")[1]
        if group == "be":
            if pronoun:
                subj, kind = rng.choice(_PREDICATE_PRONOUNS), HUMAN
            else:
                subj = self._np(NOUNS, "top")
                kind = subj.noun.kind
            clause = _Clause(subj, BE)
            clause.adj = rng.choice(_ADJECTIVES_FOR[(kind, "any")])
            if not pronoun:
                subj.avoid = clause.adj
            return clause, cost
        verb = rng.choice(_HUMAN_VERBS[group] if pronoun else _NOUN_VERBS[group])
        subj = rng.choice(PRONOUNS) if pronoun else self._np(_SUBJECT_NOUNS[verb.en], "top")
        clause = _Clause(subj, verb)
        if group == "trans":
            clause.obj = self._np(_OBJECT_NOUNS[verb.en], "top", exclude=() if pronoun else (subj.noun,))
            clause.obj.object_of = clause
        elif group == "motion":
            clause.comp = self._np(_COMPLEMENT_NOUNS[verb.en], "top", allow_some=False)
        return clause, cost

    def _new_relative(self, antecedent: _NP, budget: int) -> tuple[_Clause, int] | None:
        """A relative clause on `antecedent` of at most `budget` English tokens, and its length."""
        rng = self.rng
        noun = antecedent.noun
        options = [("subj_be", 3)]  # that is red
        if noun.kind in ANIMATE:
            options += [("subj_intr", 2), ("subj_trans", 4), ("subj_motion", 5)]  # who sleeps / likes the dog
        if _OBJECT_VERBS[noun.en]:
            options += [("obj_pron", 3), ("obj_np", 4)]  # that he reads / that the girl reads
        options = [o for o in options if o[1] <= budget]
        if not options:
            return None
        name, cost = rng.choice(options)
        if name == "subj_be":
            clause = _Clause(None, BE, "subj")
            taken = (antecedent.pre, antecedent.post)
            clause.adj = rng.choice([a for a in _ADJECTIVES_FOR[(noun.kind, "any")] if a not in taken])
        elif name.startswith("subj"):
            group = name.split("_")[1]
            verb = rng.choice([v for v in _NOUN_VERBS[group] if noun.kind in v.subjects])
            clause = _Clause(None, verb, "subj")
            if group == "trans":
                clause.obj = self._np(_OBJECT_NOUNS[verb.en], "inner", exclude=(noun,))
            elif group == "motion":
                clause.comp = self._np(_COMPLEMENT_NOUNS[verb.en], "inner", allow_some=False)
        else:
            verbs = _OBJECT_VERBS[noun.en]
            if name == "obj_pron":
                verbs = [v for v in verbs if HUMAN in v.subjects] or verbs
            verb = rng.choice(verbs)
            if name == "obj_pron" and HUMAN in verb.subjects:
                subj = rng.choice(PRONOUNS)
            else:
                if 4 > budget:
                    return None
                subj, cost = self._np(_SUBJECT_NOUNS[verb.en], "inner", exclude=(noun,)), 4
            clause = _Clause(subj, verb, "obj")
        self.rels.append(clause)
        return clause, cost

    # -- growth
    def grow(self) -> None:
        rng = self.rng
        first = self._new_clause(self.target - self.length) or self._new_clause(2)  # "he sleeps" at least
        self.clauses.append(first[0])
        self.length += first[1]
        misses = 0  # a move can find nothing to do (no adjective fits a noun): give up after a few
        while self.length < self.target and misses < 8:
            room = self.target - self.length
            moves, weights = self._moves(room)
            if not moves:
                break
            method, node = rng.choices(moves, weights)[0]
            added = method(node, room)
            self.length += added
            misses += added == 0

    def _moves(self, room: int) -> tuple[list, list]:
        """The growth moves open at this point, as (method, node) pairs, and their weights."""
        moves, weights = [], []
        if room >= 3:
            moves.append((self._add_clause, None))
            weights.append(2.5 if room >= 8 else 0.4)
        for clause in self.clauses:
            if room >= 3 and len(clause.pps) < 2 and clause.verb is not BE:
                moves.append((self._add_pp, clause))
                weights.append(0.9)
            if clause.neg is None and clause.adv is None:
                moves.append((self._add_adverb, clause))
                weights.append(0.25)
                if not _subjunctive_needed(clause.obj):
                    moves.append((self._negate, clause))
                    weights.append(0.5)
            if isinstance(clause.subj, Pronoun) and clause.verb is not BE:
                moves.append((self._pronoun_to_np, clause))
                weights.append(0.3)
        for clause in self.rels:
            if clause.neg is None:
                moves.append((self._negate, clause))
                weights.append(0.3)
        for np in self.nps:
            if np.pre is None or np.post is None:
                moves.append((self._add_adjective, np))
                weights.append(0.35)
            if np.role == "top":
                if room >= 2 and np.rel is None and not (np.object_of and np.object_of.neg and np.det == "a"):
                    moves.append((self._add_relative, np))
                    weights.append(0.6)
                if room >= 3 and np.of is None:
                    moves.append((self._add_of, np))
                    weights.append(0.25)
        return moves, weights

    def _add_clause(self, _, room: int) -> int:
        conj = self.rng.choices(_CONJ_KEYS, _CONJ_WEIGHTS)[0]
        conj_len = len(CONJUNCTIONS[conj][0])
        made = self._new_clause(room - conj_len)
        if made is None:
            return 0
        self.clauses.append(made[0])
        self.conjs.append(conj)
        return conj_len + made[1]

    def _add_pp(self, clause: _Clause, room: int) -> int:
        used = {prep for prep, _ in clause.pps}
        options = [prep for prep, (en, _, _) in PREPOSITIONS.items()
                   if prep not in used and len(en) + 2 <= room and (prep != "for" or clause.obj is not None)]
        if not options:
            return 0
        prep = self.rng.choice(options)
        en_words, fr_words, _ = PREPOSITIONS[prep]
        taken = tuple(np.noun for np in (clause.subj, clause.obj, clause.comp, *(n for _, n in clause.pps))
                      if isinstance(np, _NP))
        np = self._np(_PREP_NOUNS[prep], "top", allow_some=fr_words[-1] not in ("à", "de"), exclude=taken)
        clause.pps.append((prep, np))
        return len(en_words) + 2

    def _negate(self, clause: _Clause, room: int) -> int:
        """does not / do not (+2 tokens) or never (+1); with "be", is not / is never (+1)."""
        rng = self.rng
        if clause.verb is BE:
            clause.neg = "not" if rng.random() < 0.6 else "never"
            return 1
        if room >= 2 and rng.random() < 0.7:
            clause.neg = "not"
            return 2
        clause.neg = "never"
        return 1

    def _add_adverb(self, clause: _Clause, _room: int) -> int:
        clause.adv = self.rng.choice(_ADVERB_KEYS)
        return 1

    def _pronoun_to_np(self, clause: _Clause, _room: int) -> int:
        exclude = (clause.obj.noun,) if clause.obj is not None else ()
        clause.subj = self._np(_SUBJECT_NOUNS[clause.verb.en], "top", exclude=exclude)
        return 1

    def _add_adjective(self, np: _NP, _room: int) -> int:
        slots = [s for s in ("pre", "post") if getattr(np, s) is None]
        for slot in self.rng.sample(slots, len(slots)):
            options = [a for a in _ADJECTIVES_FOR[(np.noun.kind, slot)] if a is not np.avoid]
            if options:
                setattr(np, slot, self.rng.choice(options))
                return 1
        return 0

    def _add_relative(self, np: _NP, room: int) -> int:
        made = self._new_relative(np, room)
        if made is None:
            return 0
        np.rel = made[0]
        return made[1]

    def _add_of(self, np: _NP, _room: int) -> int:
        possessors = _HUMAN_NOUNS if np.noun.kind == HUMAN else _POSSESSOR_NOUNS  # the friend of the boy
        np.of = self._np(possessors, "of", allow_some=False, exclude=(np.noun,))
        if np.det in _POSSESSIVES:  # "my key of the teacher" is not English: the key of the teacher
            np.det = "the"
        return 3


def _subjunctive_needed(obj: _NP | None) -> bool:
    """Would negating the clause put a relative clause on a negative indefinite ("ne voit pas d'homme qui
    *soit* petit")? That wants the subjunctive, which this grammar does not make: such clauses stay positive.
    """
    return obj is not None and obj.det == "a" and obj.rel is not None


# (template, English tokens, weight); "pron" subjects are pronouns, "np" subjects noun phrases.
_TEMPLATES = (
    ("pron_intr", 2, 1.0),
    ("np_intr", 3, 1.5),
    ("pron_be", 3, 0.6),
    ("np_be", 4, 1.0),
    ("pron_trans", 4, 2.0),
    ("np_trans", 5, 3.0),
    ("pron_motion", 5, 0.6),
    ("np_motion", 6, 1.0),
)


# ----------------------------------------------------------------------------------------------- rendering
class _Pair:
    """Two token lists under construction and the links between them."""

    __slots__ = ("src", "tgt", "sure", "possible")

    def __init__(self):
        self.src, self.tgt, self.sure, self.possible = [], [], set(), set()

    def en(self, word: str) -> int:
        self.src.append(word)
        return len(self.src) - 1

    def fr(self, word: str, sure=(), possible=()) -> int:
        j = len(self.tgt)
        self.tgt.append(word)
        for i in sure:
            self.sure.add((i, j))
            self.possible.add((i, j))
        for i in possible:
            self.possible.add((i, j))
        return j


def _render_np(p: _Pair, np: _NP, *, prep=None, negated: bool = False) -> tuple[str, str]:
    """Append a noun phrase, after the preposition `prep` = (en_words, fr_words) if given.

    Returns the French gender and number (for a predicate adjective). `negated`: the NP is the direct object
    of a negated verb, so un/une/des become de (n'a pas de chien) and English "some" becomes "any".
    """
    noun, number = np.noun, np.number
    gender = noun.gender
    fr_noun = noun.fr if number == "sg" else noun.fr_pl
    # English: [prep] det adjectives noun.
    en_prep = [p.en(w) for w in prep[0]] if prep else []
    adjectives = sorted((a for a in (np.pre, np.post) if a is not None), key=lambda a: a.en_rank)
    en_noun_word = noun.en if number == "sg" else noun.en_pl
    det_row = DETERMINERS[np.det]
    det_en = det_row[0] if number == "sg" else det_row[1]
    if det_en == "a":
        det_en = _en_article(adjectives[0].en if adjectives else en_noun_word)
    elif det_en == "some" and negated:
        det_en = "any"
    i_det = p.en(det_en)
    i_adj = {a: p.en(a.en) for a in adjectives}
    i_noun = p.en(en_noun_word)
    # French: [prep] det [pre] noun [post].
    pre = np.pre.form(gender, number, starts_with_vowel_sound(fr_noun)) if np.pre is not None else None
    nxt = pre if pre is not None else fr_noun
    vowel = starts_with_vowel_sound(nxt)
    if number == "pl":
        det_fr = det_row[4]
    elif vowel:
        det_fr = det_row[5] if gender == "m" else det_row[6]
    else:
        det_fr = det_row[2] if gender == "m" else det_row[3]
    if np.det == "a" and (negated or (number == "pl" and pre is not None)):
        det_fr = "de"  # n'a pas de chien; de petits chats
    if prep:
        fr_prep = prep[1]
        fused = CONTRACTIONS.get((fr_prep[-1], det_fr))
        for w in fr_prep[:-1]:
            p.fr(w, sure=en_prep)
        if fused is not None:
            p.fr(fused, sure=(*en_prep, i_det))
        else:
            p.fr(fr_prep[-1], sure=en_prep)
            p.fr(det_fr, sure=(i_det,))
    else:
        p.fr(det_fr, sure=(i_det,))
    if pre is not None:
        p.fr(pre, sure=(i_adj[np.pre],))
    p.fr(fr_noun, sure=(i_noun,))
    if np.post is not None:
        p.fr(np.post.form(gender, number), sure=(i_adj[np.post],))
    if np.of is not None:
        _render_np(p, np.of, prep=(("of",), ("de",)))
    if np.rel is not None:
        _render_clause(p, np.rel, antecedent=np)
    return gender, number


def _render_clause(p: _Pair, c: _Clause, antecedent: _NP | None = None) -> None:
    """Append a clause; a relative clause (c.rel_kind set) gets its gap filled by `antecedent`."""
    # Subject (or the relative pronoun when the antecedent is the subject).
    if c.rel_kind is not None:
        i_rel = p.en("who" if antecedent.noun.kind == HUMAN else "that")
        p.fr("qui" if c.rel_kind == "subj" else "que", sure=(i_rel,))
    if c.rel_kind == "subj":
        person, number, gender = 3, antecedent.number, antecedent.noun.gender
    elif isinstance(c.subj, Pronoun):
        person, number, gender = c.subj.person, c.subj.number, c.subj.gender
        p.fr(c.subj.fr, sure=(p.en(c.subj.en),))
    else:
        gender, number = _render_np(p, c.subj)
        person = 3
    verb = c.verb
    fr_verb = verb.form(person, number)
    # English verb group, then French verb group (with ne … pas / jamais and the adverb).
    if verb is BE:
        i_verb = p.en(_BE_EN[(person, number)])
        i_neg = p.en(c.neg) if c.neg else None
        i_adv = p.en(c.adv) if c.adv else None
        i_do = None
    else:
        third = person == 3 and number == "sg"
        i_adv = p.en(c.adv) if c.adv else None
        if c.neg == "not":
            i_do = p.en("does" if third else "do")
            i_neg = p.en("not")
            i_verb = p.en(verb.en)
        else:
            i_do = None
            i_neg = p.en("never") if c.neg == "never" else None
            i_verb = p.en(verb.en_3sg if third else verb.en)
    do = (i_do,) if i_do is not None else ()
    if i_neg is not None:
        p.fr("ne", sure=(i_neg,), possible=do)
    p.fr(fr_verb, sure=(i_verb,), possible=do)
    if i_neg is not None:
        p.fr("pas" if c.neg == "not" else "jamais", sure=(i_neg,), possible=do)
    if i_adv is not None:
        p.fr(ADVERBS[c.adv], sure=(i_adv,))
    if c.adj is not None:
        p.fr(c.adj.form(gender, number), sure=(p.en(c.adj.en),))
    if c.rel_kind == "obj":  # the antecedent is the object: "the book that he reads"
        return
    if c.obj is not None:
        _render_np(p, c.obj, negated=c.neg is not None)
    if c.comp is not None:
        en_word, fr_word, _ = verb.complement
        _render_np(p, c.comp, prep=((en_word,), (fr_word,)))
    for prep, np in c.pps:
        en_words, fr_words, _ = PREPOSITIONS[prep]
        _render_np(p, np, prep=(en_words, fr_words))


def _render_sentence(clauses: list[_Clause], conjs: list[str]) -> _Pair:
    p = _Pair()
    for k, clause in enumerate(clauses):
        if k:
            en_words, fr_words = CONJUNCTIONS[conjs[k - 1]]
            ids = [p.en(w) for w in en_words]
            if en_words[0] == ",":
                p.fr(",", sure=(ids[0],))
                p.fr(fr_words[1], sure=(ids[1],))
            else:
                for w in fr_words:
                    p.fr(w, sure=ids)
        _render_clause(p, clause)
    p.fr(".", sure=(p.en("."),))
    tgt = p.tgt
    for j in range(len(tgt) - 1):  # elision: l'oiseau, n'aime, qu'il, j'ai, d'oiseau
        elided = ELISIONS.get(tgt[j])
        if elided is not None and starts_with_vowel_sound(tgt[j + 1]):
            tgt[j] = elided
    return p


def generate_pair(rng: random.Random, min_len: int, max_len: int) -> tuple[list, list, set, set]:
    """One sentence pair whose English side has between min_len and max_len tokens ("." included).

    Returns (src_tokens, tgt_tokens, sure_links, possible_links); links are (src_index, tgt_index).
    The target length is drawn uniformly from [min_len, max_len] and the tree grown to it, so sentence lengths
    are (close to) uniform over the range; a rare miss is redrawn.
    """
    while True:
        grower = _Grower(rng, rng.randint(min_len, max_len))
        grower.grow()
        pair = _render_sentence(grower.clauses, grower.conjs)
        if min_len <= len(pair.src) <= max_len:
            return pair.src, pair.tgt, pair.sure, pair.possible


SHORTEST_SENTENCE = 3  # "he sleeps ."
