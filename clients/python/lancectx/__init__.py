"""Client of the lancectx HTTP API (worker and master).

Standard library only. `Client.to_arrow` and `Client.to_pandas` need pyarrow (and
pandas) installed; everything else works without them.
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

    def _request(self, method, path, params=None, body=None, accept="application/json", raw=False):
        url = self.base_url + path
        if params:
            items = [(k, "true" if v is True else "false" if v is False else v) for k, v in params.items() if v is not None]
            if items:
                url += "?" + urllib.parse.urlencode(items)
        data = None
        headers = {"Accept": accept}
        if body is not None:
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
        base64 text). Returns {version, ids, count, durable, visible}."""
        recs = []
        for r in records:
            r = dict(r)
            if isinstance(r.get("binary_payload"), (bytes, bytearray)):
                r["binary_payload"] = base64.b64encode(bytes(r["binary_payload"])).decode("ascii")
            recs.append(r)
        return self._request("POST", "/api/v1/rollouts/%s/records" % _q(name), {"flush": True if flush else None},
                             body={"records": recs})

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
