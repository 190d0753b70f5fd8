"""attn-course's instructor and maintainer tools: grading, release, Gradescope, the book and the
decks, the robustness study and the `attn-course` command line.

The learner's library (`attn_course`) never imports this package; it imports the library.
"""
