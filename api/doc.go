// Package api holds what the HTTP servers (worker and master) and their clients share:
// the error envelope and its status codes, strict JSON decoding for request bodies,
// strict query parsing (an unknown parameter is a 400, never ignored), store name and
// record id validation, the request and response types of the worker routes and the
// master routes (master.go), and the OpenAPI document of both.
//
// Every error a handler gets from this package is an *Error carrying its status, so a
// handler can hand any of them to WriteError unchanged; errors of other types are
// rendered as a 500 with a generic message and logged, never sent.
package api
