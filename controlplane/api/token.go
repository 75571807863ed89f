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

// AnnotationAdminTokenGeneration is on the built-in admin token's object:
// the generation of the secret in force (auth.AdminTokenGeneration), which
// `outpost adm token rotate-admin` advances. Without it the generation is
// 0.
const AnnotationAdminTokenGeneration = "outpost.io/admin-token-generation"

// AdminTokenRotation is the reply to POST
// /apis/outpost.io/v1/admintoken/rotate: the new generation and the
// token itself, which the caller needs since the one it used just stopped
// working. Only a cluster admin gets it, over the API's TLS.
type AdminTokenRotation struct {
	TypeMeta   `json:",inline"`
	Generation int    `json:"generation"`
	Token      string `json:"token"`
}

// TokenSpec says who the token's holder is and what it may do.
type TokenSpec struct {
	// Role is one of RoleClusterAdmin, RoleNode, RoleDeveloper, RoleServer,
	// RoleFleetLock.
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
	// RoleFleetLock may only take and release reboot locks over
	// FleetLock (SPEC UPD-8): the token a self-updating host (Zincati)
	// carries in its base_url, good for nothing else.
	RoleFleetLock = "fleetlock"
)

// NodeCredentialRequest is the body of POST
// /apis/outpost.io/v1/nodecredentials: an agent holding a join token asks
// for a credential of its own node. Not stored.
type NodeCredentialRequest struct {
	TypeMeta `json:",inline"`
	// NodeName is the node the credential is for.
	NodeName string `json:"nodeName"`
	// Hosts are the addresses and names the agent's endpoint serves on;
	// they go into its certificate.
	Hosts []string `json:"hosts,omitempty"`
}

// NodeCredential is the reply: everything an agent needs to act as its
// node. The agent keeps it in its data dir, readable by root only.
type NodeCredential struct {
	TypeMeta `json:",inline"`
	NodeName string `json:"nodeName"`
	// Token is the node's bearer token, id.secret (role node, bound to
	// NodeName).
	Token string `json:"token"`
	// CACert is the cluster CA certificate (PEM), the one the join
	// string's pin named.
	CACert string `json:"caCert"`
	// Certificate and Key (PEM) are the agent's own: it serves its
	// endpoint with them and the API server checks the node's name.
	Certificate string `json:"certificate"`
	Key         string `json:"key"`
	// GossipKey (base64) encrypts the membership pool; GossipPeers are
	// servers' gossip addresses to join.
	GossipKey   string   `json:"gossipKey,omitempty"`
	GossipPeers []string `json:"gossipPeers,omitempty"`
	// Servers are the API URLs of the cluster's servers when the
	// credential was issued: the agent fails over between them.
	Servers []string `json:"servers,omitempty"`
}

// ServerList is the reply of GET /apis/outpost.io/v1/servers: the API
// URLs of the servers of the raft configuration that answer.
type ServerList struct {
	TypeMeta `json:",inline"`
	Servers  []string `json:"servers"`
}

// NodeHeartbeat is the reply of POST
// /apis/outpost.io/v1/nodes/NAME/heartbeat: the leader renewed the node's
// liveness (in memory, not in the raft log).
type NodeHeartbeat struct {
	TypeMeta `json:",inline"`
	NodeName string `json:"nodeName"`
	// Ready is the status of the stored Node's Ready condition: when it
	// is not what the agent last posted (the node lifecycle controller
	// marked it Unknown), the agent posts its status again.
	Ready string `json:"ready,omitempty"`
	// Servers are the API URLs of the servers, to fail over to.
	Servers []string `json:"servers,omitempty"`
	// NodeMonitorGracePeriodMillis is how long after the last heartbeat
	// the leader may take the node for unreachable: a cut-off agent stops
	// a pod this long plus the pod's toleration of unreachable after its
	// last acknowledged heartbeat (SPEC TNT-9).
	NodeMonitorGracePeriodMillis int64 `json:"nodeMonitorGracePeriodMillis,omitempty"`
	// ServerRole, when set, asks the agent to start the server role: the
	// control plane machine set chose this host for a server (SPEC CPL-2,
	// issue 11 item 4).
	ServerRole *ServerRoleRequest `json:"serverRole,omitempty"`
	// Release asks the agent to stop outpost's roles on the host: its
	// machine's deletion reached the provider (SPEC MCH-1, the manual
	// provider).
	Release bool `json:"release,omitempty"`
}

// ServerRoleRequest is what an agent needs to start a server that joins
// the cluster; the cluster secret it has already (a host is made eligible
// with it).
type ServerRoleRequest struct {
	// Join are the raft addresses of the servers to join through.
	Join []string `json:"join"`
	// Domain is the failure domain the server is wanted in, for the log.
	Domain string `json:"domain,omitempty"`
}
