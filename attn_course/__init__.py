"""attn-course: the helper package behind the attention course.

One module per concept, in the order the chapters teach them. The package is the single
source of truth: chapters build teaching versions inline, then assert they agree with it.
"""

__version__ = "0.1.0"
