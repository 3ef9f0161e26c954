package main

import (
	"errors"
	"fmt"
)

// checkTLS catches at start-up what would otherwise surface as every
// handshake failing: a TLS port with no certificate, or client certificates
// required with no CA to verify them against (Redis refuses that too).
// Whether the files can be read is tlsconf.New's to say. Called once each
// value is valid (loadConfig).
func (c *config) checkTLS() []error {
	var errs []error
	if c.Port == 0 && c.TLSPort == 0 {
		errs = append(errs, errors.New("port and tls-port are both 0: configured to not listen anywhere"))
	}
	if c.TLSPort != 0 && c.TLSPort == c.Port {
		errs = append(errs, fmt.Errorf("tls-port: %d is also port", c.TLSPort))
	}
	if c.TLSPort == 0 {
		return errs
	}
	if c.TLSCertFile == "" || c.TLSKeyFile == "" {
		errs = append(errs, errors.New("tls-port is set but tls-cert-file or tls-key-file is not"))
	}
	if c.TLSAuthClients != "no" && c.TLSCACertFile == "" {
		errs = append(errs, fmt.Errorf("tls-ca-cert-file is needed when tls-auth-clients is %s (client certificates are verified against it)", c.TLSAuthClients))
	}
	if c.ClusterEnabled && c.TLSCACertFile == "" {
		errs = append(errs, errors.New("tls-ca-cert-file is needed in cluster mode with tls-port: nodes verify each other's certificates on the cluster bus"))
	}
	return errs
}
