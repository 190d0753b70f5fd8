"""attn-course: the helper package behind the attention course.

One module per concept, in the order the chapters teach them. The package is the single
source of truth: chapters build teaching versions inline, then assert they agree with it.
"""

from attn_course.attention import AdditiveAttention, DotProductAttention, LuongAttention, Memory
from attn_course.masking import masked_softmax, sequence_mask

__version__ = "0.1.0"

__all__ = [
    "AdditiveAttention",
    "DotProductAttention",
    "LuongAttention",
    "Memory",
    "__version__",
    "masked_softmax",
    "sequence_mask",
]
