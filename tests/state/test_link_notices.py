"""What a link loses or has changed says so: a number written with other numerals or a sign on zero is read, with a
notice, and the page writes it back in ASCII digits."""

import pytest

from toylab.state.query import PANELS, VIEW_PARAMETERS, parse_link, to_query, view_query
from toylab.text import quoted


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


NEEDING = [name for name, parameter in VIEW_PARAMETERS.items() if parameter.needs]


@pytest.mark.parametrize("name", NEEDING)
def test_a_value_that_needs_another_the_link_leaves_off_says_so(name):
    """``?tab=Training&sga_step=0`` opened Training without the SGA view and said nothing: every parameter that takes
    effect only under other view values says so when the link leaves them off, keeps its value, and is silent when
    the link sets them."""
    parameter = VIEW_PARAMETERS[name]
    chosen = (not parameter.default) if isinstance(parameter.default, bool) else \
        parameter.allowed()[0][-1] if parameter.allowed()[0] else \
        parameter.low if parameter.low != parameter.default else parameter.high            # not its default
    value = parameter.to_url(chosen)
    other = {need: next(VIEW_PARAMETERS[need].to_url(choice) for choice in VIEW_PARAMETERS[need].choices
                        if choice != wanted)                         # a need met by its default: the link sets it
             for need, wanted in parameter.needs.items() if wanted == VIEW_PARAMETERS[need].default}  # otherwise
    link = {"tab": parameter.tab, name: value} | other
    settings, view, notices = parse_link(link)
    needs = " and ".join(f"{need} = {VIEW_PARAMETERS[need].to_url(wanted)}" for need, wanted in parameter.needs.items())
    assert notices == [f"URL parameter {name} = {quoted(value)} takes effect only with {needs}, which this link does not set: "
                       "kept for when it does."]
    assert parameter.to_url(view[name]) == value
    with_needs = link | {need: VIEW_PARAMETERS[need].to_url(wanted) for need, wanted in parameter.needs.items()}
    settings, view, notices = parse_link(with_needs)
    assert notices == [] and view_query(view)[name] == value


def test_the_sga_step_is_one_of_them():
    assert "sga_step" in NEEDING and all(name in NEEDING for name in PANELS)
