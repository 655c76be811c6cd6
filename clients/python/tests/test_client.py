"""Tests of the Python client against a running `lancectx serve`.

LANCECTX_SERVER names it (cmd/lancectx's TestPythonClient starts one and runs these).
"""

import os
import sys
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from lancectx import Client, LancectxError  # noqa: E402

SERVER = os.environ.get("LANCECTX_SERVER", "")


def unique(prefix):
    return prefix + "-" + uuid.uuid4().hex[:8]


@unittest.skipUnless(SERVER, "LANCECTX_SERVER is not set (cmd/lancectx TestPythonClient sets it)")
class ClientTest(unittest.TestCase):
    def setUp(self):
        self.c = Client(SERVER)

    def arrow_append(self):
        # The columnar route: an Arrow IPC stream of three rows as pyarrow types them
        # (int64, float64, utf8, ns timestamps), written by worker TestPythonArrowFixture.
        arrow_store = unique("pyarrow")
        self.c.create_rollout_store(arrow_store)
        with open(os.path.join(os.path.dirname(__file__), "append.arrows"), "rb") as f:
            res = self.c.append_arrow_stream(arrow_store, f.read(), flush=True)
        self.assertEqual(res["ids"], ["a-0", "a-1", "a-2"])
        self.assertTrue(res["visible"])
        rec = self.c.get_record(arrow_store, "a-1")
        self.assertEqual(rec["content"], "fixture 1")
        self.assertEqual(rec["reward"], 0.25)
        self.assertEqual(rec["role"], "assistant")
        self.assertEqual(rec["input_tokens"], [100])
        with self.assertRaises(LancectxError) as cm:
            self.c.append_arrow_stream(arrow_store, b"not an arrow stream")
        self.assertEqual(cm.exception.status, 400)

    def test_rollouts(self):
        self.arrow_append()
        name = unique("py")
        info = self.c.create_rollout_store(name)
        self.assertEqual(info["name"], name)
        self.assertIn(name, [s["name"] for s in self.c.list_rollout_stores()])
        res = self.c.append(name, [
            {"id": "s1", "rollout_id": "r1", "role": "user", "content": "2+2?"},
            {"id": "s2", "rollout_id": "r1", "sequence_order": 1, "role": "assistant", "content": "4", "reward": 1.0,
             "content_type": "image/png", "binary_payload": b"\x89PNG\x00bytes", "user_metadata": '{"filename":"four.png"}'},
        ], flush=True)
        self.assertEqual(res["count"], 2)
        self.assertTrue(res["durable"])
        self.assertTrue(res["visible"])
        page = self.c.list_records(name, limit=1)
        self.assertEqual(len(page["records"]), 1)
        self.assertTrue(page["has_more"])
        self.assertEqual([r["id"] for r in self.c.list_records(name, filter="reward > 0")["records"]], ["s2"])
        rec = self.c.get_record(name, "s2")
        self.assertEqual(rec["reward"], 1.0)
        self.assertIsNone(self.c.get_record(name, "nope"))
        self.assertEqual(self.c.get_blob(name, "s2"), b"\x89PNG\x00bytes")
        self.assertGreater(len(self.c.arrow_stream(name)), 0)

        # The master reads the same rows from storage, and SQL over them.
        q = self.c.query(name, "SELECT rollout_id, count(*) AS n, max(reward) AS best FROM records GROUP BY rollout_id")
        self.assertEqual(q["columns"], ["rollout_id", "n", "best"])
        self.assertEqual(q["rows"], [["r1", 2, 1.0]])
        self.assertFalse(q["truncated"])
        recs = self.c.experiment_records(name, source="all", rollout_id="r1")
        self.assertEqual(sorted(r["id"] for r in recs["records"]), ["s1", "s2"])
        data, ctype, filename = self.c.experiment_record_blob(name, "s2")
        self.assertEqual((data, ctype, filename), (b"\x89PNG\x00bytes", "image/png", "four.png"))

        # The experiment list, once the master observed the store (a fresh read does it now).
        self.assertEqual(self.c.experiment(name, fresh=True)["name"], name)
        self.assertIn(name, [e["name"] for e in self.c.experiments(search=name)["experiments"]])
        task = self.c.optimize(name)
        self.assertEqual(self.c.task(task["id"])["id"], task["id"])
        self.assertIn(task["id"], [t["id"] for t in self.c.tasks(limit=200)["tasks"]])
        self.assertIn("masters", self.c.cluster())

    def test_errors(self):
        with self.assertRaises(LancectxError) as cm:
            self.c.create_rollout_store("bad name!")
        self.assertEqual(cm.exception.status, 400)
        self.assertEqual(cm.exception.code, "INVALID_REQUEST")
        with self.assertRaises(LancectxError) as cm:
            self.c.list_records(unique("missing"))
        self.assertEqual(cm.exception.status, 404)
        name = unique("pyq")
        self.c.create_rollout_store(name)
        with self.assertRaises(LancectxError) as cm:
            self.c.query(name, "DROP TABLE records")
        self.assertEqual(cm.exception.status, 400)
        with self.assertRaises(ValueError):
            Client("ftp://x")

    def test_generic_and_datagen(self):
        g = unique("pyg")
        self.c.create_generic_store(g, {"columns": [{"name": "id", "type": "string", "nullable": False},
                                                    {"name": "score", "type": "float64"}]})
        self.c.append_rows(g, [{"id": "a", "score": 0.5}, {"id": "b", "score": 2.0}], flush=True)
        self.assertEqual(sorted(r["id"] for r in self.c.list_rows(g)["rows"]), ["a", "b"])
        self.assertEqual([r["id"] for r in self.c.get_rows(g, ["b", "a"])], ["b", "a"])
        self.assertEqual(self.c.query(g, "SELECT sum(score) FROM records", kind="generic")["rows"], [[2.5]])

        d = unique("pyd")
        self.c.create_datagen_store(d)
        ev = {"event_id": "e1", "item_id": "i1", "root_item_id": "i1", "item_seq": 0, "checkpoint_id": "c1",
              "event_type": "ITEM_CREATED", "attempt": 0, "run_id": "run", "writer_epoch": "w1", "schema_version": 1}
        self.c.append_events(d, [ev])
        self.c.append_events(d, [ev])  # a retried batch is idempotent
        self.assertEqual([e["event_id"] for e in self.c.item_events(d, "i1")["events"]], ["e1"])
        self.assertEqual(self.c.overview(d)["items"], 1)

    def test_to_arrow(self):
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            self.skipTest("pyarrow is not installed")
        name = unique("pya")
        self.c.create_rollout_store(name)
        self.c.append(name, [{"id": "x", "rollout_id": "r", "reward": 0.25}], flush=True)
        t = self.c.to_arrow(name)
        self.assertEqual(t.column("id").to_pylist(), ["x"])


if __name__ == "__main__":
    unittest.main()
