// Package format holds the Lance protobuf definitions, written from the Lance format
// specification, and the Go code generated from them (committed, so builds need no protoc).
//
// Regenerate with protoc 3.21 (Debian protobuf-compiler) and protoc-gen-go v1.36.12:
//
//	go generate ./lance/format
package format

//go:generate protoc -I . --go_out=. --go_opt=module=github.com/lancectx/lancectx/lance/format file.proto file2.proto encodings_v2_0.proto encodings_v2_1.proto table.proto transaction.proto
