"""Client of the lancectx HTTP API (worker and master).

Standard library only. `Client.to_arrow`, `Client.to_pandas` and `Client.append_arrow`
need pyarrow (and pandas) installed; everything else works without them
(`Client.append_arrow_stream` sends Arrow IPC bytes however they were made).
"""

import base64
import json
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Client", "LancectxError"]
__version__ = "0.1.0"

ARROW_STREAM = "application/vnd.apache.arrow.stream"


class LancectxError(Exception):
    """An error answer of the server: HTTP status, error code and message."""

    def __init__(self, status, code, message):
        super().__init__("%s (HTTP %d): %s" % (code or "error", status, message))
        self.status = status
        self.code = code
        self.message = message


def _q(s):
    return urllib.parse.quote(str(s), safe="")


class Client:
    """One lancectx server (`lancectx serve`, a worker or a master).

    base_url: e.g. "http://127.0.0.1:3000". token: the bearer token of a server
    started with --api-tokens-file. timeout: seconds per request.
    """

    def __init__(self, base_url="http://127.0.0.1:3000", token=None, timeout=60.0):
        u = urllib.parse.urlparse(base_url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError("base_url %r: want http://host:port or https://host:port" % base_url)
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    # -- plumbing ---------------------------------------------------------------

    def _request(self, method, path, params=None, body=None, accept="application/json", raw=False,
                 data=None, content_type=None):
        url = self.base_url + path
        if params:
            items = [(k, "true" if v is True else "false" if v is False else v) for k, v in params.items() if v is not None]
            if items:
                url += "?" + urllib.parse.urlencode(items)
        headers = {"Accept": accept}
        if data is not None:
            headers["Content-Type"] = content_type
        elif body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                payload = resp.read()
                if raw:
                    return payload, resp.headers
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                env = json.loads(text)["error"]
                raise LancectxError(e.code, env.get("code", ""), env.get("message", "")) from None
            except (ValueError, KeyError, TypeError):
                raise LancectxError(e.code, "", text[:200].decode("utf-8", "replace")) from None
        if not payload:
            return None
        return json.loads(payload)

    # -- rollout stores (worker) ------------------------------------------------

    def create_rollout_store(self, name):
        return self._request("POST", "/api/v1/rollouts", body={"name": name})

    def list_rollout_stores(self):
        return self._request("GET", "/api/v1/rollouts")["stores"]

    def describe_rollout_store(self, name):
        return self._request("GET", "/api/v1/rollouts/" + _q(name))

    def delete_rollout_store(self, name):
        self._request("DELETE", "/api/v1/rollouts/" + _q(name))

    def append(self, name, records, flush=False):
        """Append records (dicts with the rollout fields; binary_payload as bytes or
        base64 text). Returns {version, ids, count, durable, visible}. A pyarrow Table
        or RecordBatch goes through the columnar route instead (append_arrow)."""
        if type(records).__module__.split(".")[0] == "pyarrow":
            return self.append_arrow(name, records, flush)
        recs = []
        for r in records:
            r = dict(r)
            if isinstance(r.get("binary_payload"), (bytes, bytearray)):
                r["binary_payload"] = base64.b64encode(bytes(r["binary_payload"])).decode("ascii")
            recs.append(r)
        return self._request("POST", "/api/v1/rollouts/%s/records" % _q(name), {"flush": True if flush else None},
                             body={"records": recs})

    def append_arrow(self, name, table, flush=False, max_rows=10000):
        """Append a pyarrow Table or RecordBatch of rollout columns through the columnar
        route (needs pyarrow). Column types may be pyarrow's defaults (int64, float64,
        string, timestamps); the server checks and converts them. One request per
        max_rows rows (the server's record limit, 10,000 by default): each request is
        atomic, a table of more rows is not. Returns the answers merged: {version, ids,
        count, durable, visible}."""
        import pyarrow as pa  # noqa: PLC0415 (optional dependency)
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if table.num_rows == 0:
            raise ValueError("the table has no rows")
        out = {"version": 0, "ids": [], "count": 0, "durable": True, "visible": bool(flush)}
        for off in range(0, table.num_rows, max_rows):
            chunk = table.slice(off, max_rows)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, chunk.schema) as w:
                w.write_table(chunk)
            res = self.append_arrow_stream(name, sink.getvalue().to_pybytes(), flush)
            out["version"] = res["version"]
            out["ids"].extend(res["ids"])
            out["count"] += res["count"]
            out["durable"] = out["durable"] and res["durable"]
            out["visible"] = out["visible"] and res["visible"]
        return out

    def append_arrow_stream(self, name, data, flush=False):
        """Append the rows of an Arrow IPC stream (bytes) through the columnar route:
        one atomic append. Standard library only."""
        return self._request("POST", "/api/v1/rollouts/%s/records" % _q(name), {"flush": True if flush else None},
                             data=bytes(data), content_type=ARROW_STREAM)

    def list_records(self, name, limit=None, offset=None, filter=None):
        """A page of records (without binary payloads): {records, has_more, limit, offset}."""
        return self._request("GET", "/api/v1/rollouts/%s/records" % _q(name),
                             {"limit": limit, "offset": offset, "filter": filter})

    def get_record(self, name, record_id):
        """The record of the id, or None when the store has none."""
        return self._request("GET", "/api/v1/rollouts/%s/records/%s" % (_q(name), _q(record_id)))["record"]

    def get_blob(self, name, record_id):
        """The record's binary payload (bytes)."""
        data, _ = self._request("GET", "/api/v1/rollouts/%s/records/%s/blob" % (_q(name), _q(record_id)),
                                accept="*/*", raw=True)
        return data

    def merge_wal(self, name, flush=False):
        return self._request("POST", "/api/v1/internal/merge-wal/" + _q(name), {"flush": True if flush else None})

    def arrow_stream(self, name, filter=None, columns=None):
        """Every matching record as Arrow IPC stream bytes (the worker's Arrow route)."""
        params = {"filter": filter, "columns": ",".join(columns) if columns else None}
        data, _ = self._request("GET", "/api/v1/rollouts/%s/arrow" % _q(name), params, accept=ARROW_STREAM, raw=True)
        return data

    def to_arrow(self, name, filter=None, columns=None):
        """The records as a pyarrow.Table (needs pyarrow)."""
        import pyarrow.ipc  # noqa: PLC0415 (optional dependency)
        return pyarrow.ipc.open_stream(self.arrow_stream(name, filter, columns)).read_all()

    def to_pandas(self, name, filter=None, columns=None):
        """The records as a pandas.DataFrame (needs pyarrow and pandas)."""
        return self.to_arrow(name, filter, columns).to_pandas()

    # -- generic stores (worker) ------------------------------------------------

    def create_generic_store(self, name, schema):
        """schema: {"columns": [{"name", "type", "nullable"?, ...}]} (an `id` string column is required)."""
        return self._request("POST", "/api/v1/generic", body={"name": name, "schema": schema})

    def list_generic_stores(self):
        return self._request("GET", "/api/v1/generic")["stores"]

    def describe_generic_store(self, name):
        return self._request("GET", "/api/v1/generic/" + _q(name))

    def delete_generic_store(self, name):
        self._request("DELETE", "/api/v1/generic/" + _q(name))

    def append_rows(self, name, rows, flush=False):
        return self._request("POST", "/api/v1/generic/%s/rows" % _q(name), {"flush": True if flush else None},
                             body={"rows": list(rows)})

    def list_rows(self, name, limit=None, offset=None, filter=None):
        return self._request("GET", "/api/v1/generic/%s/rows" % _q(name), {"limit": limit, "offset": offset, "filter": filter})

    def get_row(self, name, row_id, columns=None):
        params = {"columns": ",".join(columns) if columns else None}
        return self._request("GET", "/api/v1/generic/%s/rows/%s" % (_q(name), _q(row_id)), params)

    def get_rows(self, name, ids, columns=None):
        body = {"ids": list(ids)}
        if columns:
            body["columns"] = list(columns)
        return self._request("POST", "/api/v1/generic/%s/batch-get" % _q(name), body=body)["rows"]

    def flush_generic(self, name):
        return self._request("POST", "/api/v1/generic/%s/flush" % _q(name))

    # -- datagen stores (worker) ------------------------------------------------

    def create_datagen_store(self, name):
        return self._request("POST", "/api/v1/datagen", body={"name": name})

    def list_datagen_stores(self):
        return self._request("GET", "/api/v1/datagen")["stores"]

    def delete_datagen_store(self, name):
        self._request("DELETE", "/api/v1/datagen/" + _q(name))

    def append_events(self, name, events, checkpoint=False):
        return self._request("POST", "/api/v1/datagen/%s/events" % _q(name), {"checkpoint": True if checkpoint else None},
                             body={"events": list(events)})

    def item(self, name, item_id, load_blobs=False):
        return self._request("GET", "/api/v1/datagen/%s/items/%s" % (_q(name), _q(item_id)),
                             {"load_blobs": True if load_blobs else None})

    def item_events(self, name, item_id):
        return self._request("GET", "/api/v1/datagen/%s/items/%s/events" % (_q(name), _q(item_id)))

    def item_failures(self, name, item_id):
        return self._request("GET", "/api/v1/datagen/%s/items/%s/failures" % (_q(name), _q(item_id)))

    def overview(self, name):
        return self._request("GET", "/api/v1/datagen/%s/overview" % _q(name))

    def root_status(self, name, ids):
        return self._request("GET", "/api/v1/datagen/%s/root-status" % _q(name), {"ids": ",".join(ids)})

    def root_events(self, name, root_item_id):
        return self._request("GET", "/api/v1/datagen/%s/roots/%s/events" % (_q(name), _q(root_item_id)))

    # -- the master ---------------------------------------------------------------

    def experiments(self, search=None, kind=None, limit=None, offset=None):
        """{experiments, total, stale}: every store kind unless kind is given."""
        return self._request("GET", "/api/v1/experiments", {"search": search, "kind": kind, "limit": limit, "offset": offset})

    def experiment(self, name, kind=None, fresh=False):
        return self._request("GET", "/api/v1/experiments/" + _q(name), {"kind": kind, "fresh": True if fresh else None})

    def optimize(self, name, kind=None):
        return self._request("POST", "/api/v1/experiments/%s/optimize" % _q(name), {"kind": kind})

    def query(self, name, sql, kind=None):
        """Read-only SQL over one experiment (table `records`): {columns, rows, row_count, truncated}."""
        return self._request("POST", "/api/v1/experiments/%s/query" % _q(name), {"kind": kind}, body={"sql": sql})

    def experiment_records(self, name, source=None, limit=None, offset=None, filter=None, **equals):
        """A page of a rollout experiment's records read from storage (source: fragments, wal or all)."""
        params = {"source": source, "limit": limit, "offset": offset, "filter": filter}
        params.update(equals)
        return self._request("GET", "/api/v1/experiments/%s/records" % _q(name), params)

    def experiment_record_blob(self, name, record_id):
        """(bytes, content type, file name) of a record's payload, through the master."""
        data, headers = self._request("GET", "/api/v1/experiments/%s/records/%s/blob" % (_q(name), _q(record_id)),
                                      accept="*/*", raw=True)
        disp = headers.get("Content-Disposition", "")
        filename = disp.split("filename=", 1)[1].strip('"') if "filename=" in disp else None
        return data, headers.get("Content-Type"), filename

    def tasks(self, kind=None, target=None, state=None, limit=None, offset=None):
        return self._request("GET", "/api/v1/tasks", {"kind": kind, "target": target, "state": state,
                                                       "limit": limit, "offset": offset})

    def task(self, task_id):
        return self._request("GET", "/api/v1/tasks/" + _q(task_id))

    def create_task(self, kind, target, depends_on=None):
        body = {"kind": kind, "target": target}
        if depends_on:
            body["depends_on"] = list(depends_on)
        return self._request("POST", "/api/v1/tasks", body=body)

    def cluster(self):
        return self._request("GET", "/api/v1/cluster")

    def health(self):
        return self._request("GET", "/api/v1/health")
