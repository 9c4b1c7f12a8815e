"""olcli inspect's settings lines: made from the table's rows (settings.SHOWN, Setting.shown),
in the table's order; the words are the ones inspect printed when it kept them by hand."""

from olcli import settings
from olcli.inspection import settings_lines
from olcli.learner import new_model


def test_a_plain_model_shows_one_line_and_its_hash_rule():
    model = new_model("gd", bits=12)
    assert settings_lines(model) == ["bits: 12  loss: squared  link: identity  input format: None  constant: yes",
                                     "hash: strings"]


def test_namespace_options_show_a_dash_for_the_empty_ones():
    model = new_model("gd", bits=12, interactions=["ab", "cd"], ignore="x", constant=False, hash="all")
    assert settings_lines(model) == ["bits: 12  loss: squared  link: identity  input format: None  constant: no",
                                     "interactions: ab cd  ignore: x  keep: -  ignore-linear: -"]


def test_the_set_options_are_listed_in_the_tables_order():
    model = new_model("gd", bits=12, ngram=["2"], skips=["1"], hash_seed=7, permutations=True,
                      leave_duplicate_interactions=True, link="logistic", loss="logistic")
    model.predict_only, model.input_format = "gd", "vw"
    assert settings_lines(model) == [
        "bits: 12  loss: logistic  link: logistic  input format: vw  constant: yes",
        "ngram: 2  skips: 1  hash-seed: 7  permutations  leave-duplicate-interactions  hash: strings  "
        "predict-only (weights of --gd)"]


def test_every_shown_row_is_a_stored_setting_on_a_known_line():
    for row in settings.SHOWN:
        assert row in settings.STORED and row.shown[0] in ("always", "any", "set"), row.name
    names = [row.name for row in settings.MODEL_SETTINGS if row.shown]
    assert names == [row.name for row in settings.SHOWN]


def test_inspect_prints_the_lines(cli, sample):
    code = cli("train", sample / "vw_0002.dat", "--hash-seed", "3", "-q", "Tf", "-f", "m.olm", "--quiet")[0]
    assert code == 0
    code, out, _ = cli("inspect", "m.olm")
    lines = out.decode().splitlines()
    assert code == 0 and lines[4:7] == [
        "bits: 18  loss: squared  link: identity  input format: vw  constant: yes",
        "interactions: Tf  ignore: -  keep: -  ignore-linear: -",
        "hash-seed: 3  hash: strings"]
