"""olcli.cb_format: VW's CB labels, ADF blocks and Decision Service JSON (sample_data/cb, from VW's tests)."""

from pathlib import Path

import pytest

from olcli import cb_format as cf
from olcli.errors import DataError

CB = Path(__file__).resolve().parent.parent / "sample_data" / "cb"


def lines(name):
    return (CB / name).read_text().splitlines(keepends=True)


# ----------------------------------------------------------------------------- labels

def test_label_words():
    assert cf.parse_cb_label("1:2:0.5") == cf.CbLabel("1", 2.0, 0.5)
    assert cf.parse_cb_label("3") == cf.CbLabel("3", None, 0.0)          # allowed action, no cost
    assert cf.parse_cb_label("2:1.5") == cf.CbLabel("2", 1.5, 0.0)       # cost without probability
    assert not cf.parse_cb_label("2:1.5").observed                       # p = 0: not an observation
    assert cf.parse_cb_label("1:-1:7").probability == 1.0                # > 1 read as 1, as VW does
    assert cf.parse_cb_label("1:1:-0.5").probability == 0.0


@pytest.mark.parametrize("word, needle", [("1:2:0.5:9", "malformed"), ("1:x:0.5", "cost"),
                                          ("1:1:nan", "NaN"), (":1:0.5", "malformed")])
def test_bad_label_words_name_line_and_text(word, needle):
    with pytest.raises(DataError, match=needle) as err:
        cf.parse_cb_label(word, "f.dat", 7)
    assert "f.dat, line 7" in str(err.value) and word in str(err.value)


def test_tag_rules_of_vws_text_parser():
    assert cf.split_line("1:0:0.5 'abc |f x") == (["1:0:0.5"], "abc", "|f x")
    assert cf.split_line("1:0:0.5 t|f x") == (["1:0:0.5"], "t", "|f x")     # word touching '|' is a tag
    assert cf.split_line("shared|s") == ([], "shared", "|s")                  # so this is not a shared line
    assert cf.split_line("1:0:0.5") == ([], "1:0:0.5", "")                    # no '|': last word is a tag
    assert cf.split_line("junk\t1:0:0.5 |a") == (["1:0:0.5"], None, "|a")     # text before a tab dropped
    assert cf.split_line(" | a b\n") == ([], None, "| a b")


# ----------------------------------------------------------------------------- --cb K lines

def test_cb_lines_of_rcv1_raw_cb_small():
    events = list(cf.read_cb(lines("rcv1_raw_cb_small_20.vw"), 2, "rcv1"))
    assert len(events) == 20
    e = events[0]
    assert (e.chosen, e.cost, e.probability, e.labelled) == (0, 1.0, 0.5, True)
    assert e.shared is None and e.actions[0].startswith("| tuesday year million")
    assert events[1].cost == 0.0


def test_cb_multi_cost_lines_pick_the_word_with_cost_and_probability():
    events = list(cf.read_cb(lines("cb_multi_cost.dat"), 4))
    assert [e.chosen for e in events] == [0, 1, 2, 3, 1]
    assert [e.cost for e in events] == [1.0, 2.0, 3.0, 4.0, 2.0]
    assert events[4].probability == pytest.approx(0.7)
    assert events[0].allowed == (1, 2, 3, 4)
    assert events[0].actions == ("| a b c",)


def test_cb_line_errors():
    with pytest.raises(DataError, match=r"x.dat, line 3: CB action 5 is outside 1..4"):
        cf.parse_cb_line("5:1:0.5 | a", 4, "x.dat", 3)
    with pytest.raises(DataError, match="not a number"):
        cf.parse_cb_line("a:1:0.5 | a", 4, "x.dat", 3)
    unlabelled = cf.parse_cb_line("| a b", 2)
    assert not unlabelled.labelled and unlabelled.chosen is None


# ----------------------------------------------------------------------------- ADF blocks

def test_adf_cb_test_ldf():
    events = list(cf.read_adf(lines("cb_test.ldf"), "cb_test.ldf"))
    assert len(events) == 3
    e0, e1, e2 = events
    assert e0.shared == "| s_1 s_2" and e0.actions == ("| a_1 b_1 c_1", "| a_2 b_2 c_2", "| a_3 b_3 c_3")
    assert (e0.chosen, e0.cost, e0.probability, e0.line) == (0, 1.0, 0.5, 1)
    # the labelled line's written action ("0:") is ignored: the position decides
    assert (e1.shared, e1.chosen, e1.cost, e1.line) == (None, 1, 0.0, 6)
    assert e2.chosen is None and not e2.labelled and len(e2.actions) == 2


def test_adf_without_final_newline_and_with_empty_shared():
    assert list(cf.read_adf(lines("cb_test_nonewline.ldf"))) == list(cf.read_adf(lines("cb_test.ldf")))
    events = list(cf.read_adf(lines("cb_test_with_empty_shared_feature.ldf")))
    assert events[1].shared == "|" and events[1].chosen == 1 and events[2].shared == "|"
    assert len(list(cf.read_adf(lines("cb_test_small.ldf")))) == 6


def test_adf_accepts_bytes_and_crlf():
    raw = (CB / "cb_test.ldf").read_bytes().replace(b"\n", b"\r\n").splitlines(keepends=True)
    assert list(cf.read_adf(raw)) == list(cf.read_adf(lines("cb_test.ldf")))


@pytest.mark.parametrize("text, needle, line", [
    ("shared | s\n0:1:0.5 | a\n1:0:0.5 | b\n", "only one action line", 3),
    ("shared | s\n0:1:0.5 1:2:0.5 | a\n", "one CB label, found 2", 2),
    ("| a\nshared | s\n", "must be the first line", 2),
    ("shared | s\n\n", "at least one action line", 1),
    ("shared | s\n0:zz:0.5 | a\n", "cost", 2),
])
def test_adf_errors_name_file_line_and_text(text, needle, line):
    with pytest.raises(DataError, match=needle) as err:
        list(cf.read_adf(text.splitlines(keepends=True), "bad.ldf"))
    assert f"bad.ldf, line {line}" in str(err.value)


# ----------------------------------------------------------------------------- Decision Service JSON

def test_dsjson_simple():
    (e,) = cf.read_dsjson(lines("cb_simple.json"))
    assert e.shared == "|shared f1"
    assert e.actions == ("|action f1", "|action f2")
    assert (e.chosen, e.cost, e.probability, e.weight) == (1, -1.0, 0.5, 1.0)
    assert e.pmf == ((2, 0.5), (1, 0.5))


def test_dsjson_pdrop_weights_the_event():
    (e,) = cf.read_dsjson(lines("cb_simple_pdrop.json"))
    assert e.weight == pytest.approx(10.0)


def test_dsjson_decision_service_log():
    events = list(cf.read_dsjson(lines("dsjson_cb_3.json"), "ds.json"))
    assert len(events) == 3
    e = events[0]
    assert e.event_id == "13118d9b4c114f8485d9dec417e3aefe"
    assert (e.chosen, e.cost, e.probability) == (3, -0.0, pytest.approx(0.05))
    assert e.shared == "|FromUrl timeofdayAfternoon weatherSunny nameCathy"
    # "_tag" is not a feature; "id":"Cold brew" has its space replaced, as VW's JSON parser does
    assert e.actions[1] == "|i constant:1 idCold_brew |j typecold originbrazil organicyes roastlight"
    assert [a for a, _ in e.pmf] == [4, 2, 1, 3] and e.pmf[3][1] == pytest.approx(0.85)
    assert events[1].chosen == 0 and events[1].cost == -1.0


def test_dsjson_zero_values_and_no_shared_features():
    a, b = cf.read_dsjson(lines("cb_features_w_zero_vals.dsjson"))
    assert a.shared == "|A F:0.0" and a.actions == ("", "")
    assert b.actions == ("|B f:0", "|B f:0")
    (c,) = cf.read_dsjson(lines("no_shared_features.json"))
    assert c.shared == "" and c.chosen == 1   # VW's JSON parser still makes an (empty) shared example
    assert c.actions[0] == "|name3 name4:4.65312243 name2:1.0"


def test_json_feature_mapping():
    obj = {"n": 2, "s": "a b:c", "t": True, "f": False, "z": None, "arr": [1.5, 0, 2],
           "_skip": 1, "_text": "hello world", "ns": {"x": 1, "inner": {"y": "v"}}}
    assert cf.json_features(obj, "w") == "| n:2 sa_b_c t helloworld".replace("helloworld", "hello world") + \
        " |arr 0:1.5 1:0 2:2 |ns x:1 |inner yv"


@pytest.mark.parametrize("text, needle", [
    ('{"c": {"_multi": [{}]}, "_label_cost": 1, "_label_probability": 0.5, "_labelIndex": 3}', "outside"),
    ('{"c": {"_multi": []}}', "non-empty array"),
    ('{"c": 5}', "'c'"),
    ('{"c": {"_multi": [{}]}, "_label_cost": "x"}', "_label_cost"),
    ('{"c": {"_multi": [{}]}, "_label_cost": 1}', "_label_probability"),
    ('{"c": {"_multi": [{}]}, "pdrop": 1}', "pdrop"),
    ('{"c": {"a": ["x"], "_multi": [{}]}}', "arrays of numbers"),
    ('{"c": {"_multi": [{}]}, "a": [1, 2], "p": [1]}', "same length"),
    ('{"c": ', "not valid JSON"),
    ('{"c": {"_multi": [{}]}, "_label_cost": 1' + "0" * 5000 + '}', "not valid JSON"),   # int digits limit
    ('{"c": ' + "[" * 100000 + "]" * 100000 + "}", "not valid JSON"),                     # nesting: RecursionError
])
def test_dsjson_errors_name_line_and_field(text, needle):
    with pytest.raises(DataError, match=needle) as err:
        list(cf.read_dsjson(["\n", text + "\n"], "log.json"))
    assert "log.json, line 2" in str(err.value)
