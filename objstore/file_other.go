//go:build !linux

package objstore

import "os"

// anonSupported: unnamed files (O_TMPFILE) are a Linux feature; elsewhere PutIfAbsent
// writes a named temp file.
func anonSupported() bool { return false }

func openAnon(string) (*os.File, error) { return nil, errNoAnon }

func linkAnon(*os.File, string) error { return errNoAnon }
