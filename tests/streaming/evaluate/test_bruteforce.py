"""The reference enumerator reproduces the worked examples (`python -m streaming compare` prints `same`)."""

import json
import subprocess
import sys

import pytest

from streaming.schema import Schema, load_schema
from tests.examples import EXAMPLES
from tests.streaming.bruteforce import enumerate_results, load_ops, replay

CASES = [(5, None, "events-dress-texas-tmax5.ndjson"), (4, 30, "events-dress-texas-tmax4-window30.ndjson")]


@pytest.mark.parametrize("tmax, window, expected", CASES)
def test_examples(tmp_path, tmax, window, expected):
    events = replay(load_schema(EXAMPLES / "schema.json"), ["dress", "texas"], tmax, window,
                    load_ops(str(EXAMPLES / "ops.ndjson")))
    out = tmp_path / "events.ndjson"
    out.write_text("".join(json.dumps(e) + "\n" for e in events))
    done = subprocess.run([sys.executable, "-m", "streaming", "compare", str(EXAMPLES / expected), str(out)],
                          capture_output=True, text=True)
    assert done.stdout.strip() == "same", done.stdout


def test_parallel_fks_give_distinct_results_and_no_self_join():
    schema = Schema.from_dict({"name": "s", "relations": [
        {"name": "P", "key": "id", "attributes": {"id": "int", "t": "text"}},
        {"name": "G", "key": "id", "attributes": {"id": "int", "a": "int", "b": "int"},
         "foreign_keys": [{"name": "a", "column": "a", "references": "P"},
                          {"name": "b", "column": "b", "references": "P"}]}]})
    live = {("P", 1): {"id": 1, "t": "x"}, ("P", 2): {"id": 2, "t": "y"},
            ("G", 1): {"id": 1, "a": 1, "b": 2}, ("G", 2): {"id": 2, "a": 1, "b": 1}}
    results = enumerate_results(schema, ["x", "y"], 3, live)
    assert results == {((("G", 1), ("P", 1), ("P", 2)), ((("G", 1), ("P", 1), "a"), (("G", 1), ("P", 2), "b")))}
