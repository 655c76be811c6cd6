#!/usr/bin/env python3
# Generates bad_requests.json, the bad-request corpus (see ../corpus.go). Edit the cases
# here and rerun: python3 gen_bad_requests.py
import base64, json, os
R = '/api/v1/rollouts/{store}/records'
ok = {"id": "r-1", "rollout_id": "traj-1"}
def body(*recs, extra=None):
    d = {"records": list(recs)}
    return json.dumps(d, separators=(',', ':'))
def rec(**kw):
    d = dict(ok); d.update(kw); return d
cases = []
def add(name, layer, method, path, status, code, content_type="application/json", body=None, body_base64=None, fill=None, msg=None):
    c = {"name": name, "layer": layer, "method": method, "path": path}
    if content_type is not None: c["content_type"] = content_type
    if body is not None: c["body"] = body
    if body_base64 is not None: c["body_base64"] = body_base64
    if fill is not None: c["fill"] = fill
    c["want_status"] = status; c["want_code"] = code
    if msg: c["want_message"] = msg
    cases.append(c)
B = lambda name, b, msg=None, status=400, code="INVALID_REQUEST", ct="application/json", **kw: add(name, "body", "POST", R, status, code, content_type=ct, body=b, msg=msg, **kw)

# malformed JSON and wrong shapes
B("truncated JSON is refused with the offset", '{"records":[', "invalid JSON at offset 12")
B("text that is not JSON is refused", 'hello', "invalid JSON at offset 0")
B("an empty body is refused", '', "invalid JSON")
B("whitespace alone is refused", '   \n', "invalid JSON")
B("a top-level array is refused", '[]', "expected an object, got array")
B("a top-level null is refused", 'null', "expected an object, got null")
B("a body without records is refused", '{}', "records: required")
B("records null is refused", '{"records":null}', "records: required")
B("an empty batch is refused", '{"records":[]}', "at least one record")
B("records as an object is refused", '{"records":{}}', "records: expected an array, got object")
B("a record that is not an object is refused", '{"records":[1]}', "records[0]: expected an object, got number")
B("a trailing comma is refused", '{"records":[{"id":"a","rollout_id":"b"},]}', "invalid JSON")
B("single quotes are refused", "{'records':[]}", "invalid JSON at offset 1")
B("data after the body is refused", body(ok) + ' x', "after the top-level value")
B("two JSON values are refused", body(ok) + body(ok), "after the top-level value")
B("a top-level unknown key is refused", '{"records":[{"id":"a","rollout_id":"b"}],"flush":true}', 'unknown field "flush"')
B("a duplicate top-level key is refused", '{"records":[{"id":"a","rollout_id":"b"}],"records":[]}', 'duplicate key "records"')
# required fields and ids
B("a record without id is refused", body({"rollout_id": "t"}), "records[0].id: required")
B("a record without rollout_id is refused", body({"id": "a"}), "records[0].rollout_id: required")
B("an empty id is refused", body(rec(id="")), "records[0].id: must not be empty")
B("a numeric id is refused", '{"records":[{"id":7,"rollout_id":"t"}]}', "records[0].id: expected a string, got number")
B("an id with NUL is refused", body(rec(id="a\u0000b")), "records[0].id: control character")
B("an id of 513 bytes is refused", body(rec(id="x" * 513)), "records[0].id: is 513 bytes long")
B("a null id is refused", '{"records":[{"id":null,"rollout_id":"t"}]}', "records[0].id: required")
B("an empty problem_id is refused", body(rec(problem_id="")), "records[0].problem_id: must not be empty")
# unknown / duplicate fields
B("an unknown record field is refused", body(rec(rewrd=1.0)), 'records[0]: unknown field "rewrd"')
B("a field in the wrong case is refused", '{"records":[{"ID":"a","rollout_id":"t"}]}', 'records[0]: unknown field "ID"')
B("a duplicate record key is refused", '{"records":[{"id":"a","id":"b","rollout_id":"t"}]}', 'records[0]: duplicate key "id"')
B("a duplicate key spelled with an escape is refused", '{"records":[{"id":"a","\\u0069d":"b","rollout_id":"t"}]}', 'duplicate key "id"')
# wrong types and ranges
B("a string reward is refused", body(ok, rec(id="r-2", reward="high")), "records[1].reward: expected a number, got string")
B("a reward beyond float32 is refused", '{"records":[{"id":"a","rollout_id":"t","reward":1e39}]}', "records[0].reward: 1e39 is out of range")
B("a huge number is refused", '{"records":[{"id":"a","rollout_id":"t","reward":1e400}]}', "records[0].reward: 1e400 is out of range")
B("a fractional sequence_order is refused", '{"records":[{"id":"a","rollout_id":"t","sequence_order":1.5}]}', "records[0].sequence_order: expected an integer, got 1.5")
B("a sequence_order beyond int32 is refused", '{"records":[{"id":"a","rollout_id":"t","sequence_order":3000000000}]}', "records[0].sequence_order: 3000000000 is out of range")
B("a negative token count is refused", body(rec(num_input_tokens=-1)), "records[0].num_input_tokens: must not be negative")
B("a loss_mask value beyond int8 is refused", body(rec(loss_mask=[1, 300])), "records[0].loss_mask[1]: 300 is out of range (-128 to 127)")
B("a null inside input_tokens is refused", '{"records":[{"id":"a","rollout_id":"t","input_tokens":[1,null]}]}', "records[0].input_tokens[1]: expected an integer, got null")
B("a string inside output_logprobs is refused", body(rec(output_logprobs=[-0.1, "x"])), "records[0].output_logprobs[1]: expected a number, got string")
B("a string include_in_training is refused", body(rec(include_in_training="yes")), "records[0].include_in_training: expected true or false, got string")
B("a boolean content is refused", body(rec(content=True)), "records[0].content: expected a string, got boolean")
B("a created_at that is not RFC 3339 is refused", body(rec(created_at="yesterday")), "records[0].created_at: \"yesterday\" is not an RFC 3339 timestamp")
B("a numeric created_at is refused", body(rec(created_at=1700000000)), "records[0].created_at: expected a string, got number")
B("a created_at without a zone is refused", body(rec(created_at="2024-05-01T12:00:00")), "records[0].created_at")
# payloads
B("invalid base64 is refused", body(rec(binary_payload="!!!!")), "records[0].binary_payload: invalid base64")
B("base64 with a line break is refused", body(rec(binary_payload="aGVs\nbG8=")), "records[0].binary_payload: invalid base64: line break")
B("unpadded base64 is refused", body(rec(binary_payload="aGVsbG8")), "records[0].binary_payload: invalid base64")
B("URL-safe base64 is refused", body(rec(binary_payload="-_-_")), "records[0].binary_payload: invalid base64")
B("a payload_size that differs from the payload is refused", body(rec(binary_payload="aGVsbG8=", payload_size=6)), "records[0].payload_size: is 6 but binary_payload decodes to 5 bytes")
B("a negative payload_size is refused", body(rec(payload_size=-1)), "records[0].payload_size: must not be negative")
# labels
B("an empty role is refused", body(rec(role="")), "records[0].role: must not be empty")
B("a 65-byte role is refused", body(rec(role="r" * 65)), "records[0].role: is 65 bytes long")
B("a role with a newline is refused", body(rec(role="as\nsistant")), "records[0].role: control character")
B("an empty content_type is refused", body(rec(content_type="")), "records[0].content_type: must not be empty")
B("a relationship without target_id is refused", body(rec(relationships=[{"relation": "parent"}])), "records[0].relationships[0].target_id: required")
B("relationships as an object is refused", body(rec(relationships={"target_id": "x"})), "records[0].relationships: expected an array, got object")
B("a relationship with an unknown key is refused", body(rec(relationships=[{"target_id": "x", "relation": "p", "kind": 1}])), 'records[0].relationships[0]: unknown field "kind"')
# nesting, encoding
deep = '{"records":[{"id":"a","rollout_id":"t","metadata":' + '[' * 100 + ']' * 100 + '}]}'
B("metadata nested 100 levels deep is refused", deep, "nested deeper than 64 levels")
B("invalid UTF-8 in a string is refused", None, "invalid UTF-8", body_base64=base64.b64encode(b'{"records":[{"id":"a\xff","rollout_id":"t"}]}').decode())
B("a lone surrogate escape is refused", '{"records":[{"id":"a\\ud800","rollout_id":"t"}]}', "not followed by a low surrogate")
B("a raw control character in a string is refused", '{"records":[{"id":"a\tb","rollout_id":"t"}]}', "control character 0x09 in string")
B("a leading zero is refused", '{"records":[{"id":"a","rollout_id":"t","sequence_order":01}]}', "leading zero")
B("a byte order mark is refused", None, "invalid JSON at offset 0", body_base64=base64.b64encode(b'\xef\xbb\xbf' + body(ok).encode()).decode())
# media types and sizes
B("a text/plain body is refused", body(ok), "unsupported Content-Type", status=415, code="UNSUPPORTED_MEDIA_TYPE", ct="text/plain")
B("a form-urlencoded body is refused", body(ok), "unsupported Content-Type", status=415, code="UNSUPPORTED_MEDIA_TYPE", ct="application/x-www-form-urlencoded")
B("a malformed Content-Type is refused", body(ok), "malformed Content-Type", status=415, code="UNSUPPORTED_MEDIA_TYPE", ct="application/json; charset")
B("a latin1 JSON body is refused", body(ok), "charset", status=415, code="UNSUPPORTED_MEDIA_TYPE", ct="application/json; charset=latin1")
B("a body over the limit is refused", body(ok) + '@@FILL@@', "larger than the limit of 1048576 bytes", status=413, code="PAYLOAD_TOO_LARGE", fill={"marker": "@@FILL@@", "char": " ", "count": 1100000})
B("more records than the limit is refused", body(*[rec(id="r-%d" % i) for i in range(101)]), "at most 100 per request", status=413, code="PAYLOAD_TOO_LARGE")
B("a payload over the part limit is refused", body(rec(binary_payload="@@FILL@@")), "larger than the limit of 65536 bytes", status=413, code="PAYLOAD_TOO_LARGE", fill={"marker": "@@FILL@@", "char": "A", "count": 93336})

# multipart
BD = "XBOUNDARYX"
MP = "multipart/form-data; boundary=" + BD
def mp(*parts, close=True, preamble=""):
    out = preamble
    for headers, content in parts:
        out += "--" + BD + "\r\n"
        for h in headers:
            out += h + "\r\n"
        out += "\r\n" + content + "\r\n"
    if close:
        out += "--" + BD + "--\r\n"
    return out
def part(name, content, extra=()):
    return (['Content-Disposition: form-data; name="%s"' % name] + list(extra), content)
meta1 = body(rec(payload_size=5))
meta2 = body(rec(payload_size=5), rec(id="r-2", payload_size=3))
M = lambda name, b, msg=None, status=400, code="INVALID_REQUEST", ct=MP, **kw: add(name, "body", "POST", R, status, code, content_type=ct, body=b, msg=msg, **kw)
M("multipart without a boundary parameter is refused", mp(part("metadata", meta1), part("0", "hello")), "no boundary", ct="multipart/form-data")
M("multipart whose first part is not metadata is refused", mp(part("0", "hello"), part("metadata", meta1)), 'first multipart part must be named "metadata"')
M("multipart with no parts is refused", "--" + BD + "--\r\n", "no parts")
M("multipart with a part name that is not an index is refused", mp(part("metadata", meta1), part("payload", "hello")), 'multipart part "payload": the name must be a zero-based record index')
M("multipart with a negative part index is refused", mp(part("metadata", meta1), part("-1", "hello")), "zero-based record index")
M("multipart with a zero-padded part index is refused", mp(part("metadata", meta1), part("00", "hello")), "zero-based record index")
M("multipart with an index past the records is refused", mp(part("metadata", meta1), part("0", "hello"), part("1", "abc")), 'multipart part "1": there are only 1 records')
M("multipart with a part given twice is refused", mp(part("metadata", meta2), part("0", "hello"), part("0", "hello")), 'multipart part "0" is given twice')
M("multipart with a part shorter than payload_size is refused", mp(part("metadata", meta1), part("0", "hell")), 'multipart part "0" is 4 bytes but records[0].payload_size is 5')
M("multipart with a part longer than payload_size is refused", mp(part("metadata", meta1), part("0", "hello!")), 'longer than records[0].payload_size')
M("multipart missing a declared part is refused", mp(part("metadata", meta2), part("0", "hello")), 'records[1] declares payload_size 3 but the body has no part "1"')
M("multipart metadata carrying base64 is refused", mp(part("metadata", body(rec(binary_payload="aGVsbG8="))), part("0", "hello")), "records[0].binary_payload: must be null in a multipart request")
M("multipart with two metadata parts is refused", mp(part("metadata", meta1), part("metadata", meta1), part("0", "hello")), 'multipart part "metadata" is given twice')
M("multipart without its closing boundary is refused", mp(part("metadata", meta1), part("0", "hello"), close=False), "malformed multipart body")
M("multipart whose metadata is not JSON is refused", mp(part("metadata", "{records"), part("0", "hello")), "invalid JSON")
M("multipart whose metadata has an empty batch is refused", mp(part("metadata", '{"records":[]}')), "at least one record")
M("multipart with a base64 transfer encoding is refused", mp(part("metadata", meta1), part("0", "aGVsbG8=", ["Content-Transfer-Encoding: base64"])), "Content-Transfer-Encoding")
M("multipart with a part without a name is refused", mp(part("metadata", meta1), (['Content-Disposition: attachment'], "hello")), "without a form-data name")
M("multipart with a part over the part limit is refused", mp(part("metadata", body(ok)), part("0", "@@FILL@@")), "larger than the limit of 65536 bytes", status=413, code="PAYLOAD_TOO_LARGE", fill={"marker": "@@FILL@@", "char": "x", "count": 70000})
M("multipart with a payload_size over the part limit is refused", mp(part("metadata", body(rec(payload_size=70000))), part("0", "x")), "larger than the limit of 65536 bytes", status=413, code="PAYLOAD_TOO_LARGE")

# store names in paths (the worker answers before any I/O)
def N(name, raw, path, msg=None):
    c = {"name": name, "layer": "name", "method": "POST", "path": path, "content_type": "application/json",
         "body": body(ok), "store_name": raw, "want_status": 400, "want_code": "INVALID_REQUEST"}
    if msg: c["want_message"] = msg
    cases.append(c)
N("a store name with .. is refused", "a..b", "/api/v1/rollouts/a..b/records", '".."')
N("a store name with an escaped slash is refused", "a/b", "/api/v1/rollouts/a%2Fb/records", "'/' at byte 1")
N("a store name with an escaped backslash is refused", "a\\b", "/api/v1/rollouts/a%5Cb/records", "at byte 1 is not allowed")
N("a store name with NUL is refused", "a\u0000b", "/api/v1/rollouts/a%00b/records", "NUL")
N("a store name of 200 characters is refused", "n" * 200, "/api/v1/rollouts/" + "n" * 200 + "/records", "200 bytes long")
N("a store name with a space is refused", "a b", "/api/v1/rollouts/a%20b/records", "a space")
N("a store name with a colon is refused", "a:b", "/api/v1/rollouts/a:b/records", "':' at byte 1")
N("a store name starting with a dot is refused", ".hidden", "/api/v1/rollouts/.hidden/records", "must start with")
N("a store name starting with a dash is refused", "-x", "/api/v1/rollouts/-x/records", "must start with")
N("a non-ASCII store name is refused", "caf\u00e9", "/api/v1/rollouts/caf%C3%A9/records", "non-ASCII")
N("the reserved store name _registry is refused", "_registry", "/api/v1/rollouts/_registry/records", "reserved")
N("a store name ending with a dot is refused", "abc.", "/api/v1/rollouts/abc./records", "end with")

# store creation
C = lambda name, b, msg=None, status=400, code="INVALID_REQUEST", ct="application/json": add(name, "create", "POST", "/api/v1/rollouts", status, code, content_type=ct, body=b, msg=msg)
C("creating a store named .. is refused", '{"name":".."}', "must start with")
C("creating a store with a slash in its name is refused", '{"name":"a/b"}', "'/'")
C("creating a store with NUL in its name is refused", '{"name":"a\\u0000b"}', "NUL")
C("creating a store with a 200-character name is refused", json.dumps({"name": "n" * 200}), "200 bytes long")
C("creating a store with an empty name is refused", '{"name":""}', "store name is empty")
C("creating a store without a name is refused", '{}', "store name is empty")
C("creating the reserved store _stats is refused", '{"name":"_STATS"}', "reserved")
C("creating a store with an unknown field is refused", '{"name":"ok","kind":"rollout"}', 'unknown field "kind"')
C("creating a store with a numeric name is refused", '{"name":5}', "name: expected a string, got number")
C("creating a store with a non-string storage option is refused", '{"name":"ok","storage_options":{"region":1}}', 'storage_options.region: expected a string, got number')
C("creating a store from malformed JSON is refused", '{"name":', "invalid JSON")
C("creating a store from a text/plain body is refused", '{"name":"ok"}', "unsupported Content-Type", status=415, code="UNSUPPORTED_MEDIA_TYPE", ct="text/plain")

# query parameters
def Q(name, method, path, msg=None, b=None):
    c = {"name": name, "layer": "query", "method": method, "path": path}
    if b is not None:
        c["content_type"] = "application/json"; c["body"] = b
    c["want_status"] = 400; c["want_code"] = "INVALID_REQUEST"
    if msg: c["want_message"] = msg
    cases.append(c)
Q("filters that are not JSON are refused", "GET", R + "?filters=%7Bnope", "filters: invalid JSON at offset 1")
Q("filters with an unknown key are refused", "GET", R + "?filters=%7B%22reward%22%3A1%7D", 'filters: unknown field "reward"')
Q("a filter with the wrong type is refused", "GET", R + "?filters=%7B%22policy_version%22%3A42%7D", "filters.policy_version: expected a string, got number")
Q("a string include_in_training filter is refused", "GET", R + "?filters=%7B%22include_in_training%22%3A%22yes%22%7D", "filters.include_in_training: expected true or false")
Q("filters that are an array are refused", "GET", R + "?filters=%5B%5D", "filters: expected an object, got array")
Q("a zero limit is refused", "GET", R + "?limit=0", "limit=0 is out of range")
Q("a non-numeric limit is refused", "GET", R + "?limit=ten", "not an integer")
Q("a limit over the maximum is refused", "GET", R + "?limit=100001", "more than one answer holds (100000 rows")
Q("a negative offset is refused", "GET", R + "?offset=-1", "out of range")
Q("a list with an unknown parameter is refused, naming the accepted ones", "GET", R + "?rollout_id=traj1",
  'unknown query parameter "rollout_id": this route accepts limit, offset, filter, filters')
Q("a misspelled limit is refused rather than ignored", "GET", R + "?limt=5", 'unknown query parameter "limt"')
Q("a list with several unknown parameters names them", "GET", R + "?role=user&dataset=train", 'unknown query parameters "dataset", "role"')
Q("a list filter that does not parse is refused", "GET", R + "?filter=reward%20%3E", "filter:")
Q("a list filter given twice is refused", "GET", R + "?filter=reward%20%3E%201&filter=reward%20%3C%202", "given 2 times")
Q("a list query with a bad escape is refused rather than dropped", "GET", R + "?filter=%ZZ", "the query string is malformed")
Q("an append with an unknown parameter is refused", "POST", R + "?flsh=true", 'unknown query parameter "flsh": this route accepts flush', b=body(ok))
Q("flush=yes is refused rather than read as false", "POST", R + "?flush=yes", "flush=\"yes\" is not a boolean", b=body(ok))
Q("flush given twice is refused", "POST", R + "?flush=true&flush=false", "given 2 times", b=body(ok))

# record ids in paths
def I(name, raw, path, msg):
    cases.append({"name": name, "layer": "id", "method": "GET", "path": path, "record_id": raw,
                  "want_status": 400, "want_code": "INVALID_REQUEST", "want_message": msg})
I("a record id with NUL is refused", "a\u0000", R + "/a%00", "control character")
I("a record id of 600 bytes is refused", "i" * 600, R + "/" + "i" * 600, "600 bytes long")
I("a record id with invalid UTF-8 is refused", "a\udcff", R + "/a%FF", "invalid UTF-8")

# unknown stores (only the worker can answer these)
def S(name, method, path, b=None):
    c = {"name": name, "layer": "store", "method": method, "path": path}
    if b is not None:
        c["content_type"] = "application/json"; c["body"] = b
    c.update({"want_status": 404, "want_code": "NOT_FOUND"})
    cases.append(c)
S("appending to an unknown store is refused", "POST", "/api/v1/rollouts/no-such-store/records", body(ok))
S("listing an unknown store is refused", "GET", "/api/v1/rollouts/no-such-store/records")
S("describing an unknown store is refused", "GET", "/api/v1/rollouts/no-such-store")
S("deleting an unknown store is refused", "DELETE", "/api/v1/rollouts/no-such-store")
S("reading the payload of a missing record is a 404", "GET", R + "/no-such-record/blob")

names = [c["name"] for c in cases]
assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
doc = {
  "description": "Requests the worker must refuse with a 4xx JSON error and without writing anything. Replay each against a worker whose limits are those below, with a store named by store_placeholder already created; check want_status, want_code, that the message contains want_message when given, and that the store's object listing is unchanged. body is UTF-8 text (body_base64 when the bytes are not UTF-8); fill, when present, replaces marker in the body with count copies of char. layer says what refuses the request: body (the append decoder), create (store creation), name (store name rules), query (query parameters: unknown names, limit, offset, filter, filters, flush), id (record id rules), store (the registry: unknown store or record).",
  "store_placeholder": "{store}",
  "limits": {"max_body_bytes": 1048576, "max_records": 100, "max_part_bytes": 65536, "max_list_rows": 100000},
  "cases": cases,
}
# 'a\udcff' is not encodable; fix id case raw bytes via base64
for c in cases:
    if c.get("record_id") == "a\udcff":
        c["record_id_base64"] = base64.b64encode(b"a\xff").decode(); del c["record_id"]
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "bad_requests.json"), "w") as f:
    json.dump(doc, f, indent=1, ensure_ascii=True)
    f.write("\n")
print(len(cases), {l: sum(1 for c in cases if c["layer"] == l) for l in set(c["layer"] for c in cases)})
