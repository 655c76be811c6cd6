// Package api holds what the worker's HTTP server and its clients share: the error
// envelope and its status codes, strict JSON decoding for request bodies, store name
// and record id validation, the request and response types, and the OpenAPI document
// of the worker routes.
//
// Every error a handler gets from this package is an *Error carrying its status, so a
// handler can hand any of them to WriteError unchanged; errors of other types are
// rendered as a 500 with a generic message and logged, never sent.
package api
