package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// newProcessRegistry is the metrics registry of a serving process (worker, master,
// serve): the services' own metrics plus the Go runtime's and the process's
// (go_goroutines, process_open_fds, process_resident_memory_bytes), which is what an
// operator, the soak test and the chaos suite watch for leaks.
func newProcessRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
