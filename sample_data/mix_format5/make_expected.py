"""Run once with the code of 3c26c82 (format 5: --mix mixes all four members, --oaa too) to
write the old-model fixtures of tests/test_mixture.py (format 6 mixes two with --oaa)."""
import hashlib, json
import numpy as np
from olcli.learner import Learner
from olcli import model as model_file

out = "sample_data/mix_format5"
a9a = open("sample_data/a9a_train.vw").read().splitlines()
letter = open("sample_data/letter_train.vw").read().splitlines()
cases = {
    "a9a_logistic": (dict(loss="logistic", bits=10), a9a[:400], a9a[400:800]),
    "letter_oaa26": (dict(loss="logistic", bits=6, oaa=26), letter[:300], letter[300:600]),
    "letter_softmax26": (dict(bits=6, softmax=26), letter[:300], letter[300:600]),
}
expected = {}
for name, (opts, head, tail) in cases.items():
    m = Learner("mix", **opts)
    m.learn(head)
    m.save(f"{out}/{name}.olm")
    again = Learner.from_model(model_file.load(f"{out}/{name}.olm"))
    r = again.learn(tail)
    preds = np.asarray(r.predictions if r.scores is None else r.scores, dtype=np.float64)
    expected[name] = {
        "continue_lines": [len(head), len(head) + len(tail)],
        "predictions_sha256": hashlib.sha256(preds.tobytes()).hexdigest(),
        "first_predictions_hex": [float(x).hex() for x in preds.ravel()[:12]],
        "state_sha256": hashlib.sha256(np.ascontiguousarray(again.model.state).tobytes()).hexdigest(),
        "scalars_hex": [float(x).hex() for x in again.model.scalars],
        "loss": r.loss,
    }
json.dump(expected, open(f"{out}/expected.json", "w"), indent=1)
print(json.dumps(expected, indent=1)[:600])
