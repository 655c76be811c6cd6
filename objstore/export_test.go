package objstore

// UseNamedTempFiles makes s's PutIfAbsent write named temp files, the path taken where
// unnamed ones (O_TMPFILE) do not work, so the tests cover both.
func UseNamedTempFiles(s *FileStore) { s.noAnon.Store(true) }

// UsesUnnamedTempFiles reports whether s's PutIfAbsent still takes the unnamed path.
func UsesUnnamedTempFiles(s *FileStore) bool { return !s.noAnon.Load() }
