package server

// gossipJoinInfo is the gossip key and the servers' gossip addresses
// handed to a joining agent.
func (s *Server) gossipJoinInfo() ([]byte, []string) {
	return nil, nil
}
