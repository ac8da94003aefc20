"""The K-pad padding rule (pure function, no vLLM)."""

from kpad_plugin import PAD_TOKEN_ID, pad_draft


def test_empty_draft_is_padded_to_k():
    assert pad_draft([], 4, room=100) == [-1, -1, -1, -1]


def test_partial_draft_keeps_real_tokens_first():
    assert pad_draft([11, 12], 5, room=100) == [11, 12, -1, -1, -1]


def test_full_draft_is_unchanged():
    assert pad_draft([1, 2, 3, 4], 4, room=100) == [1, 2, 3, 4]


def test_room_smaller_than_k_pads_only_to_room():
    assert pad_draft([7], 8, room=3) == [7, -1, -1]


def test_no_room_pads_nothing_and_never_shortens():
    assert pad_draft([], 8, room=0) == []
    assert pad_draft([], 8, room=-5) == []
    assert pad_draft([1, 2], 8, room=1) == [1, 2]


def test_pad_token_is_minus_one():
    assert PAD_TOKEN_ID == -1
