// Package deploy is how delayd is installed and run outside a developer's
// shell, and the tests that hold it to the server: the release binaries that
// scripts/release.sh builds, the container image (container/), the systemd
// unit (systemd/), the 3-node compose file (compose/) and the Kubernetes
// manifests (kubernetes/). The Prometheus rules and the Grafana dashboard
// beside them are checked against /metrics in package web.
//
// The package has no code. Its tests build a release binary once, start it,
// and check every manifest's arguments, ports and probes against that
// binary's own flags, so a renamed flag or a moved port fails here rather
// than in a user's cluster.
package deploy
