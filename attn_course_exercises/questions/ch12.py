"""Chapter 12's predict-then-see questions: BLEU on real sentences, by length, and what a crossing counts."""

from attn_course_exercises.predict import Choice, Number

QUESTIONS = (
    Number(
        key="ch12.p1",
        prompt=(
            "On the toy corpus, Bahdanau's model scored above 90 BLEU (chapter 4). Trained for two epochs on "
            "22,500 of the shipped sample's real pairs and scored against every accepted translation, what "
            "BLEU does it reach on the test sentences?"
        ),
        answer=18.0,
        tolerance=5.0,
        why=(
            "About 18 (other seeds and machines land between 17.1 and 19.4). Guesses near the toy corpus's "
            "90s forget what real sentences add: several thousand words, many seen only a few times and some "
            "never (`<unk>`), more right translations than the file lists, and far less training per word. "
            "Guesses near the papers' 27 to 41 compare across test sets: BLEU is only comparable on the same "
            "sentences, references and tokenisation."
        ),
        reveal="The next cell translates the test sentences with all three models and prints their BLEU.",
        unit="BLEU",
    ),
    Choice(
        key="ch12.p2",
        prompt=(
            "Tatoeba's sentences are short: most have 5 to 7 tokens. On the shipped sample, from sentences "
            "of 1-4 tokens to those of 8 or more, what does Bahdanau's BLEU do?"
        ),
        options=[
            (
                "It holds level: attention removes the length problem",
                "Tempting from chapter 4 and Bahdanau et al.'s Fig. 2, where the attention model's curve "
                "held up. What attention removes is the one-vector bottleneck, which bites on sentences far "
                "longer than these; it does not make a longer sentence as easy as a short one.",
            ),
            (
                "It falls: a longer sentence has more words to get right, and rarer ones among them",
                "By several points even at these lengths, and not because of the bottleneck: because each "
                "extra word is another chance to miss, and longer sentences use rarer words.",
            ),
            (
                "It rises: a longer sentence gives the model more context to go on",
                "Tempting, since one-word sentences like 'go .' can be ambiguous. But BLEU needs every "
                "n-gram right, and more words mean more n-grams to miss.",
            ),
        ],
        answer=1,
        reveal="The next cell plots BLEU by source length for the three models.",
    ),
    Number(
        key="ch12.p3",
        prompt=(
            "'the black cat sleeps .' becomes 'le chat noir dort .'. The right alignment puts 'chat' on "
            "'cat' and 'noir' on 'black': its rows' darkest cells sit at source words 0, 2, 1, 3, 4, one "
            "crossing. A misreading model takes the source strictly left to right, except that 'le' points "
            "at 'sleeps': 3, 1, 2, 3, 4. How many crossings does `alignment_crossings` count for it?"
        ),
        answer=2,
        tolerance=0,
        why=(
            "A crossing is a pair of target words t1 < t2 whose source words come in the other order. 'le' "
            "(source word 3) comes before 'chat' (1) and 'noir' (2): two crossings; 'dort' sits on 3 too, "
            "and two rows on the same word do not cross. So the misreading model, which gets neither 'chat' "
            "nor 'noir' right, counts more crossings than the right alignment. The tempting 0 reads a "
            "crossing as 'a word that moved', and this model moved none; the tempting 1 counts the one wrong "
            "row once. A count says an alignment is not monotone, not that any word moved correctly."
        ),
        reveal="The next cell counts the crossings of both alignments and draws them.",
        unit="crossings",
    ),
    Number(
        key="ch12.p4",
        prompt=(
            "French moves every adjective of colour or nationality after its noun, and every object pronoun "
            "before its verb. In what share of the shipped sample's test sentences does Bahdanau's argmax "
            "alignment (reference fed) cross at least once?"
        ),
        answer=5.0,
        tolerance=3.0,
        why=(
            "About 5 %, one sentence in twenty (other seeds and machines: 4.3 % to 5.7 %). Guesses of a "
            "third or more count how often French reorders; but after this short training Bahdanau's "
            "attention reads the source mostly left to right, and whatever reordering its translations get "
            "right, the encoder's annotations and the decoder's state carry. An attention that does not look "
            "back does not prove the model ignores word order."
        ),
        reveal="The next cell counts the test sentences whose alignment crosses.",
        unit="%",
    ),
)
