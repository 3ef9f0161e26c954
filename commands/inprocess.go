package commands

// SetReadOnly is READONLY for a connection made in process (the HTTP
// side's, web.Server.Do): on a cluster follower its reads are served from
// the follower's own copy, as a RESP client's are after READONLY, instead
// of being redirected to the leader with MOVED.
func (c *Client) SetReadOnly(on bool) { c.readonly.Store(on) }
