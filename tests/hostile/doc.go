// Package hostile replays a corpus of hostile requests (malformed and deeply nested
// JSON, wrong types, huge numbers, bad base64, multipart tricks, path traversal and
// control characters in names and ids, injection attempts in filters, oversized,
// slow and repeated input, wrong methods and content types, missing or wrong
// credentials) against every endpoint of a worker and a master served together as
// `lancectx serve` serves them, with authentication on. Every request must get its
// expected 4xx with the JSON error envelope and change no object of the data
// directory and no task key in etcd.
//
// The corpus is data: testdata/corpus.json (hand-written cases),
// rollout/rollouttest's bad append requests, and the families generated in
// corpus_test.go (every route crossed with methods, hostile names and ids, and
// credentials).
package hostile
