package agent

import "github.com/outpost-edge/outpost/controlplane/client"

// SavedNodeClient is the API client configuration and the node name of
// the credential the agent saved in dataDir when it joined, for a
// program on the same host that must see the node as its agent does
// (`outpost install agent` waiting for the node to be Ready). ok is
// false before the first join.
func SavedNodeClient(dataDir string) (cfg client.Config, nodeName string, ok bool, err error) {
	c, err := loadCredential(dataDir)
	if err != nil || c == nil {
		return client.Config{}, "", false, err
	}
	return c.clientConfig(), c.NodeName, true, nil
}
