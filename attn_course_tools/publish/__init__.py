"""Publishing: the HTML book (Sphinx) and the lecture decks (reveal.js), with their scripts vendored.
"""
