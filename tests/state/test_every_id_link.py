"""Every id of the catalogue opens by link, with every parameter at its default and at its edges (None included: a text
threshold such as areal's lower = "none" parses to None), and the page's controls give the same Settings back.

The path a link takes on the page: ``parse_link`` → Settings → the sidebar's controls (``controls_of``) →
``make_settings`` of the controls → ``to_query`` → the address. Each step must keep the Settings, and the address must
reopen them with no notice. (tests/page/test_every_id_page.py opens the same links on every tab of the page.)
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from link_edges import edges, text, thresholds_of

from toylab.catalogue.estimators import ESTIMATORS, resolve_params
from toylab.state.query import CONTROL_NAMES, FIELDS, controls_of, make_settings, parse_link, to_query

PROPERTY = settings(derandomize=True, database=None, deadline=None, max_examples=200)
CASES = [(id, name, value) for id, estimator in ESTIMATORS.items() for name, param in estimator.params.items()
         for value in edges(param)]


def link_of(id, values):
    return {"est": id} | thresholds_of(id, values)


def assert_round_trip(link):
    """The link opens without a notice, its Settings survive the sidebar's controls, and the address reopens them."""
    opened, _, notices = parse_link(link)
    assert not notices, (link, notices)
    controls = controls_of(opened)
    thresholds = {(id, name): controls[f"{id}.{name}"] for id in opened.estimators for name in ESTIMATORS[id].params}
    values = {FIELDS.get(name, name): controls[name] for name in CONTROL_NAMES}
    assert make_settings(**(values | {"estimators": controls["est"], "thresholds": thresholds})) == opened, link
    address = to_query(opened)
    assert all(isinstance(value, str) for value in address.values())
    assert parse_link(address)[0] == opened and not parse_link(address)[2], (link, address)
    return opened


def test_every_id_opens_at_its_defaults_and_writes_the_bare_link():
    for id in ESTIMATORS:
        opened = assert_round_trip({"est": id})
        assert opened.estimators == (id,) and opened.thresholds == ()
        assert to_query(opened) == {"est": id}


@pytest.mark.parametrize("id", list(ESTIMATORS))
def test_every_parameter_of_every_id_opens_at_each_edge(id):
    for name, param in ESTIMATORS[id].params.items():
        for value in edges(param):
            try:
                resolve_params(id, {name: text(value)})
            except ValueError:                    # an edge beyond its pair's default (lo above the default hi)
                continue
            assert_round_trip(link_of(id, {name: value}))


def test_the_areal_presets_open_with_their_bound_none():
    """The links the page writes when an areal preset is picked: lower = "none" parses to None (issue 25)."""
    for id in ("areal:token_mask", "areal:token_clamp", "areal:sequence_mask", "areal:sequence_clamp"):
        opened = assert_round_trip({"est": id})
        assert opened.params(id)["lower"] is None and controls_of(opened)[f"{id}.lower"] == "none"
        assert_round_trip({"est": id, f"{id}.lower": "0.5"})


@PROPERTY
@given(st.lists(st.sampled_from(list(ESTIMATORS)), min_size=1, max_size=6, unique=True), st.data())
def test_any_ids_with_parameters_drawn_from_their_edges_open_together(ids, data):
    link = {"est": ",".join(ids)}
    for id in ids:
        chosen = {name: data.draw(st.sampled_from(edges(param))) for name, param in ESTIMATORS[id].params.items()
                  if data.draw(st.booleans())}
        try:
            resolve_params(id, {name: text(value) for name, value in chosen.items()})
        except ValueError:
            continue
        link |= thresholds_of(id, chosen)
    assert_round_trip(link)


def test_every_case_is_drawn_from_the_whole_catalogue():
    assert {id for id, _, _ in CASES} == {id for id, estimator in ESTIMATORS.items() if estimator.params}
    assert any(value == "none" for _, _, value in CASES)                  # the text that parses to None
