"""What a link loses or has changed says so: a number written with other numerals or a sign on zero is read, with a
notice, and the page writes it back in ASCII digits."""

import pytest

from toylab.state.query import parse_link, to_query, view_query


@pytest.mark.parametrize(("link", "name", "read"), [
    ({"T": "٣"}, "T", "3"),                                          # Arabic-Indic digit three
    ({"T": "３"}, "T", "3"),                                          # fullwidth
    ({"seed": "߇"}, "seed", "7"),                                    # N'Ko digit seven
    ({"mismatch": "-0"}, "mismatch", "0"),
    ({"mismatch": "+0.0"}, "mismatch", "0"),
    ({"tab": "Ratios", "draw": "-0"}, "draw", "0"),
    ({"est": "tok_tis", "tok_tis.C": "٣"}, "tok_tis.C", "3"),
    ({"est": "verl:bypass_ppo_clip", "verl:bypass_ppo_clip.clip_ratio_low": "-0"},
     "verl:bypass_ppo_clip.clip_ratio_low", "0"),
])
def test_a_normalised_number_is_read_with_a_notice_and_written_in_ascii(link, name, read):
    settings, view, notices = parse_link(link)
    assert len(notices) == 1 and f"URL parameter {name} = " in notices[0] and f"read as {read}." in notices[0]
    address = to_query(settings) | view_query(view)
    assert address.get(name, read) == read and all(value.isascii() for value in address.values())
    assert parse_link(address)[2] == []


@pytest.mark.parametrize("link", [{"T": "3"}, {"T": " 3 "}, {"mismatch": "0"}, {"mismatch": "0.50"}, {"T": "3.0"},
                                  {"est": "tok_tis", "tok_tis.C": "3"}])
def test_a_number_in_ascii_digits_has_no_notice(link):
    assert parse_link(link)[2] == []
