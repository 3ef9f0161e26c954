package web

// metricsRoutes registers /metrics.
func (s *Server) metricsRoutes() {}
