package web

// dashboardRoutes registers the dashboard's pages, its assets and the JSON
// it updates itself from.
func (s *Server) dashboardRoutes() {}
