// Package agent is the node agent, `outpost agent`: it joins the cluster
// with a join string (trusting the CA by its pin, trading the join token
// for a credential of its own node), registers the Node with the host's
// capacity, node info and labels, reports conditions as they change and
// as a heartbeat, joins the gossip pool, and runs the pods bound to its
// node through a container runtime (containerd, behind the Runtime
// interface declared here), reporting their status back.
//
// Edge autonomy: the desired pods are kept in a bbolt file in the data
// dir, written before they are acted on. With the control plane away,
// running pods go on and restart policies still apply; an agent started
// while it is away brings the same pods back from the file; once it
// answers again, its list wins and the agent reconciles to it.
//
// Run is the whole agent; cmd/outpost wires flags to Config and calls it.
package agent
