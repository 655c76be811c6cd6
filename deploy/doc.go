// Package deploy holds the deployment kit of lancectx: the container image recipe
// (Dockerfile), the kustomize base and overlays (base/, overlays/s3, overlays/azure),
// the Prometheus alert rules (prometheus/alerts.yaml) and the Grafana dashboard
// (grafana/lancectx.json). Its tests decode every manifest strictly into the Kubernetes
// API types, build the overlays, check the invariants the binaries depend on, run the
// binaries with the manifests' environment, and check that every metric the alerts and
// the dashboard name is exported by a running master and worker.
package deploy
