"""Sizes: ``golden_model.units.parse_size`` and ``format_size`` (units as README's "Network
options" lists them)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from golden_model.errors import ConfigError
from golden_model.units import format_size, parse_size


@pytest.mark.parametrize("text, num_bytes", [("64MiB", 64 << 20), ("64MB", 64 * 10**6),
                                              ("3KB", 3000), ("1kib", 1024), ("7", 7),
                                              ("2TiB", 2 << 40), ("1TB", 10**12)])
def test_parse(text, num_bytes):
    assert parse_size(text) == num_bytes


@pytest.mark.parametrize("num_bytes, text", [(64 << 20, "64MiB"), (64 * 10**6, "64MB"),
                                              (3000, "3KB"), (1536, "1536B"), (0, "0B"),
                                              (1 << 40, "1TiB"), (2 * 10**6, "2MB"),
                                              (1000 << 10, "1000KiB")])
def test_format(num_bytes, text):
    assert format_size(num_bytes) == text


@given(st.integers(min_value=1, max_value=4 << 40))
def test_format_reads_back(num_bytes):
    assert parse_size(format_size(num_bytes)) == num_bytes


@pytest.mark.parametrize("text", ["", "MiB", "1.5MiB", "-1KiB", "1XB"])
def test_bad(text):
    with pytest.raises(ConfigError):
        parse_size(text)
