"""attn_course.validation: every check accepts good input and refuses bad input with a message that names the
argument, what was expected and what came."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attn_course.validation import (
    check_floating,
    check_int,
    check_number,
    check_positive_int,
    check_probability,
    check_shape,
    check_tensor,
    check_tokens,
    check_valid_lens,
)

# ----------------------------------------------------------------------------------------------- numbers


def test_check_int_returns_ints_in_range_including_numpy_ones():
    assert check_int("beam_size", 3, low=1, high=16) == 3
    assert check_int("beam_size", 16, low=1, high=16) == 16
    value = check_int("seed", np.int64(7))
    assert value == 7 and type(value) is int
    assert check_int("offset", -5) == -5  # no bounds: any int


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, r"beam_size must be an int in \[1, 16\], got True"),
        (2.0, r"beam_size must be an int in \[1, 16\], got 2\.0"),
        ("2", r"beam_size must be an int in \[1, 16\], got '2'"),
        (None, r"beam_size must be an int in \[1, 16\], got None"),
        (0, r"beam_size must be an int in \[1, 16\], got 0"),
        (17, r"beam_size must be an int in \[1, 16\], got 17"),
    ],
)
def test_check_int_refuses_bool_float_and_out_of_range_naming_argument_bound_and_value(value, message):
    with pytest.raises(ValueError, match=message):
        check_int("beam_size", value, low=1, high=16)


def test_check_int_states_one_sided_bounds():
    with pytest.raises(ValueError, match=r"num_pairs must be an int >= 0, got -1"):
        check_int("num_pairs", -1, low=0)
    with pytest.raises(ValueError, match=r"level must be an int <= 3, got 4"):
        check_int("level", 4, high=3)
    with pytest.raises(ValueError, match=r"min_len must be an int, got 1\.5"):
        check_int("min_len", 1.5)


@pytest.mark.parametrize(("value", "shown"), [(0, "0"), (-3, "-3"), (True, "True"), (1.0, r"1\.0")])
def test_check_positive_int_refuses_zero_negatives_bool_and_float(value, shown):
    assert check_positive_int("window", 1) == 1
    with pytest.raises(ValueError, match=rf"window must be an int >= 1, got {shown}"):
        check_positive_int("window", value)


def test_check_number_accepts_ints_and_floats_and_returns_a_float():
    value = check_number("temperature", 2, low=0, low_open=True)
    assert value == 2.0 and type(value) is float
    assert check_number("lr_decay", 1.0, low=0, high=1, low_open=True) == 1.0
    assert check_number("shift", -0.5) == -0.5


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, r"temperature must be a finite number > 0, got 0"),
        (-1.5, r"temperature must be a finite number > 0, got -1\.5"),
        (True, r"temperature must be a finite number > 0, got True"),
        (math.inf, r"temperature must be a finite number > 0, got inf"),
        (math.nan, r"temperature must be a finite number > 0, got nan"),
        ("1", r"temperature must be a finite number > 0, got '1'"),
    ],
)
def test_check_number_refuses_bool_non_finite_and_out_of_range(value, message):
    with pytest.raises(ValueError, match=message):
        check_number("temperature", value, low=0, low_open=True)


def test_check_number_states_closed_and_open_intervals():
    with pytest.raises(ValueError, match=r"lr_decay must be a finite number in \(0, 1\], got 0"):
        check_number("lr_decay", 0, low=0, high=1, low_open=True)
    with pytest.raises(ValueError, match=r"lr_decay must be a finite number in \(0, 1\], got 1\.5"):
        check_number("lr_decay", 1.5, low=0, high=1, low_open=True)
    with pytest.raises(ValueError, match=r"x must be a finite number <= 2, got 3"):
        check_number("x", 3, high=2)
    with pytest.raises(ValueError, match=r"x must be a finite number < 2, got 2"):
        check_number("x", 2, high=2, high_open=True)


def test_check_probability_accepts_both_ends_unless_told_otherwise():
    assert check_probability("p", 0) == 0.0
    assert check_probability("p", 1) == 1.0
    assert check_probability("dropout", 0.0, allow_one=False) == 0.0
    with pytest.raises(ValueError, match=r"dropout must be a finite number in \[0, 1\), got 1"):
        check_probability("dropout", 1, allow_one=False)
    with pytest.raises(ValueError, match=r"p must be a finite number in \(0, 1\], got 0"):
        check_probability("p", 0, allow_zero=False)


@pytest.mark.parametrize(
    ("value", "shown"), [(-0.1, r"-0\.1"), (1.1, r"1\.1"), (True, "True"), (None, "None")]
)
def test_check_probability_refuses_bool_and_values_outside_zero_one(value, shown):
    with pytest.raises(ValueError, match=rf"dropout must be a finite number in \[0, 1\), got {shown}"):
        check_probability("dropout", value, allow_one=False)


# ----------------------------------------------------------------------------------------------- tensors


def test_check_tensor_and_check_floating_name_the_argument_and_what_came():
    x = torch.zeros(2)
    assert check_tensor("x", x) is x
    assert check_floating("x", x) is x
    with pytest.raises(ValueError, match="x must be a torch.Tensor, got list"):
        check_tensor("x", [0.0])
    with pytest.raises(ValueError, match="scores must be a floating-point tensor, got dtype torch.int64"):
        check_floating("scores", torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="scores must be a torch.Tensor, got ndarray"):
        check_floating("scores", np.zeros(2))


def test_check_shape_names_dimensions_and_marks_free_ones():
    keys = torch.zeros(4, 5, 7)
    assert check_shape("keys", keys, {"batch_size": 4, "num_keys": None, "key_size": 7}) is keys
    message = r"keys has shape \(4, 5, 7\), expected \(batch_size, num_keys, key_size\) = \(4, \*, 8\)"
    with pytest.raises(ValueError, match=message):
        check_shape("keys", keys, {"batch_size": 4, "num_keys": None, "key_size": 8})
    with pytest.raises(ValueError, match=r"keys has shape \(4, 5, 7\), expected \(4, 5\)"):
        check_shape("keys", keys, (4, 5))
    with pytest.raises(ValueError, match=r"valid_lens has shape \(\), expected \(batch_size,\) = \(4,\)"):
        check_shape("valid_lens", torch.tensor(3), {"batch_size": 4})


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_check_tokens_accepts_every_integer_dtype(dtype):
    src = torch.zeros(3, 5, dtype=dtype)
    assert check_tokens("src", src) is src
    assert check_tokens("src", src, batch_size=3) is src


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        (torch.zeros(3, dtype=torch.long), r"src has shape \(3,\), expected \(batch_size, num_steps\)"),
        (
            torch.zeros(3, 5, 1, dtype=torch.long),
            r"src has shape \(3, 5, 1\), expected \(batch_size, num_steps\)",
        ),
        (torch.zeros(3, 5), "src has dtype torch.float32, expected an integer dtype"),
        (torch.zeros(3, 5, dtype=torch.bool), "src has dtype torch.bool, expected an integer dtype"),
        ([[1, 2]], "src must be a torch.Tensor, got list"),
        (
            torch.zeros(2, 5, dtype=torch.long),
            r"src has shape \(2, 5\), expected \(batch_size, num_steps\) = \(3, \*\)",
        ),
    ],
)
def test_check_tokens_refuses_other_ranks_dtypes_and_batch_sizes(tokens, message):
    with pytest.raises(ValueError, match=message):
        check_tokens("src", tokens, batch_size=3)


# ----------------------------------------------------------------------------------------------- valid_lens


def test_check_valid_lens_takes_none_per_sequence_and_per_query_lengths():
    assert check_valid_lens(None, 2, 3, 4, low=0) is None
    per_sequence = torch.tensor([0, 4])
    assert check_valid_lens(per_sequence, 2, 3, 4, low=0) is per_sequence
    per_query = torch.tensor([[1, 2, 3], [4, 0, 0]], dtype=torch.int32)
    assert check_valid_lens(per_query, 2, 3, 4, low=0) is per_query
    assert check_valid_lens(per_query, 2, None, 4, low=0) is per_query  # num_queries unknown yet


def test_the_lower_bound_is_explicit_zero_for_attention_one_for_source_lengths():
    lens = torch.tensor([0, 3])
    assert check_valid_lens(lens, 2, None, 3, low=0) is lens  # attention: an empty row gets zero weights
    message = r"src_valid_lens must lie in \[1, num_keys\] = \[1, 3\], got values from 0 to 3"
    with pytest.raises(ValueError, match=message):
        check_valid_lens(lens, 2, None, 3, low=1, per_query=False, name="src_valid_lens")
    with pytest.raises(TypeError, match="low"):
        check_valid_lens(lens, 2, None, 3)  # no default: every caller says which rule it follows


def test_check_valid_lens_refuses_values_above_num_keys_naming_both_ends():
    with pytest.raises(
        ValueError, match=r"valid_lens must lie in \[0, num_keys\] = \[0, 4\], got values from 2 to 5"
    ):
        check_valid_lens(torch.tensor([2, 5]), 2, None, 4, low=0)


def test_per_query_false_refuses_two_dimensional_lengths():
    lens = torch.tensor([[1, 2, 3], [3, 2, 1]])
    with pytest.raises(
        ValueError, match=r"src_valid_lens has shape \(2, 3\), expected \(batch_size,\) = \(2,\)$"
    ):
        check_valid_lens(lens, 2, None, 3, low=1, per_query=False, name="src_valid_lens")
    assert check_valid_lens(lens, 2, None, 3, low=1) is lens  # the attention form accepts it


@pytest.mark.parametrize(
    ("lens", "message"),
    [
        (torch.tensor([1.0, 2.0]), "valid_lens must hold integer lengths, got dtype torch.float32"),
        (torch.tensor([True, False]), "valid_lens must hold integer lengths, got dtype torch.bool"),
        ([1, 2], "valid_lens must be a torch.Tensor, got list"),
        (
            torch.tensor([1, 2, 3]),
            r"valid_lens has shape \(3,\), expected \(batch_size,\) = \(2,\) or "
            r"\(batch_size, num_queries\) = \(2, 5\)",
        ),
        (torch.ones(2, 4, dtype=torch.long), r"valid_lens has shape \(2, 4\), expected"),
    ],
)
def test_check_valid_lens_refuses_floats_bools_lists_and_wrong_shapes(lens, message):
    with pytest.raises(ValueError, match=message):
        check_valid_lens(lens, 2, 5, 6, low=0)


def test_check_valid_lens_can_skip_the_value_check_and_accept_any_num_queries():
    lens = torch.tensor([[9, 9, 9], [9, 9, 9]])
    assert check_valid_lens(lens, 2, None, 4, low=0, check_values=False) is lens
    assert check_valid_lens(None, 2, 3, 4, low=0) is None
    with pytest.raises(ValueError, match=r"got values from 9 to 9"):
        check_valid_lens(lens, 2, None, 4, low=0)


def test_an_empty_batch_has_no_values_to_check():
    empty = torch.zeros(0, dtype=torch.long)
    assert check_valid_lens(empty, 0, None, 3, low=1, per_query=False) is empty
