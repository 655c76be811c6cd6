//go:build !linux

package objstore

import "os"

// anonSupported: unnamed files (O_TMPFILE) are a Linux feature; elsewhere PutIfAbsent
// writes a named temp file.
func anonSupported() bool { return false }

func openAnon(string) (*os.File, error) { return nil, errNoAnon }

func linkAnon(*os.File, string) error { return errNoAnon }

// readDirents reads all entries of dir in directory order, without a stat each.
func readDirents(dir string) ([]rawDirent, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	des, err := d.ReadDir(-1)
	out := make([]rawDirent, len(des))
	for i, de := range des {
		out[i] = rawDirent{name: de.Name(), mode: de.Type(), typeKnown: true}
	}
	return out, err
}
