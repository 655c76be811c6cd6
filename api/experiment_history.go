package api

import "time"

// VersionInfo is one committed version of an experiment's dataset: when it was
// committed, by which operation, and the table's size then (live rows, fragments).
type VersionInfo struct {
	Version      uint64    `json:"version"`
	Timestamp    time.Time `json:"timestamp"`
	Operation    string    `json:"operation,omitempty"`
	Rows         int64     `json:"rows"`
	Fragments    int       `json:"fragments"`
	ManifestSize int64     `json:"manifest_size"`
}

// ExperimentVersionsResponse answers GET /api/v1/experiments/{name}/versions: the
// newest Limit versions of the dataset, oldest first (what a chart of the table's
// size over time plots), and how many versions storage holds in all.
type ExperimentVersionsResponse struct {
	Name     string        `json:"name"`
	Kind     string        `json:"kind"`
	Versions []VersionInfo `json:"versions"`
	Total    int           `json:"total"`
	Limit    int           `json:"limit"`
}

// FragmentInfo is one fragment of a dataset's current version.
type FragmentInfo struct {
	ID           uint64 `json:"id"`
	PhysicalRows int64  `json:"physical_rows"`
	DeletedRows  int64  `json:"deleted_rows"`
	DataFiles    int    `json:"data_files"`
	// Bytes is the size of its data files as the manifest records it (0 when the
	// writer did not record sizes).
	Bytes int64 `json:"bytes"`
}

// ExperimentFragmentsResponse answers GET /api/v1/experiments/{name}/fragments: the
// fragments of the dataset's current version, in manifest order.
type ExperimentFragmentsResponse struct {
	Name      string         `json:"name"`
	Kind      string         `json:"kind"`
	Version   uint64         `json:"version"`
	Fragments []FragmentInfo `json:"fragments"`
	Rows      int64          `json:"rows"`
}
