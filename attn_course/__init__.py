"""attn-course: the helper package behind the attention course.

One module per concept, in the order the chapters teach them. The package is the single
source of truth: chapters build teaching versions inline, then assert they agree with it.
Data (`attn_course.data.tasks`), metrics, plots, widgets, exercise checks and grading live in their
own modules and are imported from there.
"""

from attn_course.attention.layers import AdditiveAttention, DotProductAttention, LuongAttention, Memory
from attn_course.attention.masking import masked_softmax, sequence_mask
from attn_course.models.decoders import BahdanauDecoder, LuongDecoder, PlainDecoder
from attn_course.models.decoding import beam_search, greedy_decode, translate
from attn_course.models.encoders import Encoder, EncoderOutput
from attn_course.models.seq2seq import ModelConfig, Seq2Seq, build_model
from attn_course.training.loop import (
    TrainConfig,
    load_checkpoint,
    masked_cross_entropy,
    save_checkpoint,
    train,
)

__version__ = "0.1.0"

__all__ = [
    "AdditiveAttention",
    "BahdanauDecoder",
    "DotProductAttention",
    "Encoder",
    "EncoderOutput",
    "LuongAttention",
    "LuongDecoder",
    "Memory",
    "ModelConfig",
    "PlainDecoder",
    "Seq2Seq",
    "TrainConfig",
    "__version__",
    "beam_search",
    "build_model",
    "greedy_decode",
    "load_checkpoint",
    "masked_cross_entropy",
    "masked_softmax",
    "save_checkpoint",
    "sequence_mask",
    "train",
    "translate",
]
