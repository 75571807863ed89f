package api

// Token is a bearer credential. Its name is the token's public ID; only a
// hash of the secret half is stored, so a copy of the store or a snapshot
// does not hand out credentials. Served under the outpost.io group to
// cluster admins only.
type Token struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       TokenSpec `json:"spec"`
}

// TokenSpec says who the token's holder is and what it may do.
type TokenSpec struct {
	// Role is one of RoleClusterAdmin, RoleNode, RoleDeveloper, RoleServer.
	Role string `json:"role"`
	// Namespaces limits a developer token to these namespaces.
	Namespaces []string `json:"namespaces,omitempty"`
	// NodeName binds a node token to one node. A node token without a
	// name is a join token: it may only obtain a credential for a node.
	NodeName string `json:"nodeName,omitempty"`
	// SecretHash is the hex SHA-256 of the secret half of the token.
	SecretHash  string `json:"secretHash"`
	Expires     *Time  `json:"expires,omitempty"`
	Description string `json:"description,omitempty"`
}

// Roles.
const (
	RoleClusterAdmin = "cluster-admin"
	RoleNode         = "node"
	RoleDeveloper    = "developer"
	RoleServer       = "server"
)
