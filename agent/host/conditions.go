package host

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Reasons of the conditions the agent reports, in the kubelet's words with
// "Agent" for "Kubelet".
const (
	ReasonReady              = "AgentReady"
	ReasonRuntimeDown        = "ContainerRuntimeDown"
	ReasonNetworkNotReady    = "NetworkNotReady"
	ReasonSufficientMemory   = "AgentHasSufficientMemory"
	ReasonInsufficientMemory = "AgentHasInsufficientMemory"
	ReasonNoDiskPressure     = "AgentHasNoDiskPressure"
	ReasonDiskPressure       = "AgentHasDiskPressure"
	ReasonSufficientPID      = "AgentHasSufficientPID"
	ReasonInsufficientPID    = "AgentHasInsufficientPID"
	ReasonHasNetwork         = "AgentHasNetwork"
	ReasonNoDefaultRoute     = "NoDefaultRoute"
	ReasonInterfaceDown      = "InterfaceDown"
	ReasonNotObserved        = "AgentCannotObserve"
	readyMessage             = "outpost agent is posting ready status"
	sufficientMemoryMessage  = "outpost agent has sufficient memory available"
	noDiskPressureMessage    = "outpost agent has no disk pressure"
	sufficientPIDMessage     = "outpost agent has sufficient PID available"
)

// Conditions computes the agent's five node conditions (NetworkUnavailable,
// MemoryPressure, DiskPressure, PIDPressure, Ready, in the kubelet's order)
// from one observation. A condition keeps prev's LastTransitionTime while
// its status stays the same; LastHeartbeatTime is now. Conditions of prev
// of other types are not carried over: the agent owns these five only.
//
// Ready is False when runtimeErr is not nil (ContainerRuntimeDown, with the
// error's text) or the network is unavailable (NetworkNotReady). A
// pressure condition whose inputs were not observed is Unknown
// (AgentCannotObserve): no taint follows from it, and nobody is told the
// node is fine when the agent does not know.
func Conditions(prev []api.NodeCondition, obs Observation, thresholds []Threshold, runtimeErr error, now time.Time) []api.NodeCondition {
	net := networkCondition(obs.Network)
	next := []api.NodeCondition{
		net,
		memoryPressure.condition(obs, thresholds),
		diskPressure.condition(obs, thresholds),
		pidPressure.condition(obs, thresholds),
		readyCondition(net, runtimeErr),
	}
	for i := range next {
		c := &next[i]
		// Each time its own value: the caller may change one.
		c.LastHeartbeatTime = api.NewTime(now)
		c.LastTransitionTime = api.NewTime(now)
		if p := find(prev, c.Type); p != nil && p.Status == c.Status && p.LastTransitionTime != nil {
			*c.LastTransitionTime = *p.LastTransitionTime
		}
	}
	return next
}

// Changed reports whether next differs from prev in what the control
// plane acts on: the set of types, a status or a reason. Heartbeat times
// are ignored, and so are messages: under pressure they carry the
// observed amount, which moves on every look, and would turn every look
// into a write; they travel with the next heartbeat instead.
func Changed(prev, next []api.NodeCondition) bool {
	if len(prev) != len(next) {
		return true
	}
	for _, n := range next {
		p := find(prev, n.Type)
		if p == nil || p.Status != n.Status || p.Reason != n.Reason {
			return true
		}
	}
	return false
}

func find(cs []api.NodeCondition, typ string) *api.NodeCondition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

func cond(typ string, pressure bool, reason, msg string) api.NodeCondition {
	st := api.ConditionFalse
	if pressure {
		st = api.ConditionTrue
	}
	return api.NodeCondition{Type: typ, Status: st, Reason: reason, Message: msg}
}

func unknown(typ, msg string) api.NodeCondition {
	return api.NodeCondition{Type: typ, Status: api.ConditionUnknown, Reason: ReasonNotObserved, Message: msg}
}

func networkCondition(n NetworkStats) api.NodeCondition {
	switch {
	case n.Available():
		how := "default route via " + n.Interface
		if n.Configured {
			how = "interface " + n.Interface
		}
		return cond(api.NodeNetworkUnavailable, false, ReasonHasNetwork, how+" is "+n.OperState)
	case n.Interface == "" || n.Interface == "lo":
		return cond(api.NodeNetworkUnavailable, true, ReasonNoDefaultRoute, "no default route except through loopback")
	default:
		return cond(api.NodeNetworkUnavailable, true, ReasonInterfaceDown,
			fmt.Sprintf("interface %s is %s", n.Interface, n.OperState))
	}
}

func readyCondition(net api.NodeCondition, runtimeErr error) api.NodeCondition {
	var reason string
	var why []string
	if runtimeErr != nil {
		reason = ReasonRuntimeDown
		why = append(why, "container runtime is down: "+runtimeErr.Error())
	}
	if net.Status == api.ConditionTrue {
		if reason == "" {
			reason = ReasonNetworkNotReady
		}
		why = append(why, "network is unavailable: "+net.Message)
	}
	if reason == "" {
		return api.NodeCondition{Type: api.NodeReady, Status: api.ConditionTrue, Reason: ReasonReady, Message: readyMessage}
	}
	return api.NodeCondition{Type: api.NodeReady, Status: api.ConditionFalse, Reason: reason, Message: strings.Join(why, "; ")}
}

// crossing describes the thresholds of the given signals that obs
// crosses, one phrase each, and names the signals with a threshold that
// could not be judged because obs lacks them. An inode signal on a
// filesystem that was read but has no inode table (btrfs) is neither.
func crossing(obs Observation, thresholds []Threshold, sigs ...Signal) (msgs []string, unobserved []string) {
	for _, t := range thresholds {
		if !contains(sigs, t.Signal) {
			continue
		}
		v, total, unit, ok := signalValue(obs, t.Signal)
		if !ok {
			if !inodesNotApplicable(obs, t.Signal) {
				unobserved = append(unobserved, string(t.Signal))
			}
			continue
		}
		if limit := t.Limit(total); v < limit {
			msgs = append(msgs, fmt.Sprintf("%s is %s (%s of %s), under the threshold %s",
				t.Signal, amount(v, unit), percent(v, total), amount(total, unit), t))
		}
	}
	return msgs, unobserved
}

func inodesNotApplicable(obs Observation, s Signal) bool {
	switch s {
	case SignalNodeFSInodesFree:
		return obs.NodeFS.CapacityBytes > 0
	case SignalImageFSInodesFree:
		return obs.ImageFS.CapacityBytes > 0
	}
	return false
}

func contains(sigs []Signal, s Signal) bool {
	for _, x := range sigs {
		if x == s {
			return true
		}
	}
	return false
}

// signalValue is the observed amount of a signal and the total it is a
// share of; ok is false when the observation lacks it (inode counts on
// filesystems without an inode table included).
func signalValue(obs Observation, s Signal) (v, total int64, bytes, ok bool) {
	switch s {
	case SignalMemoryAvailable:
		return obs.Memory.AvailableBytes, obs.Memory.TotalBytes, true, obs.Memory.TotalBytes > 0
	case SignalNodeFSAvailable:
		return obs.NodeFS.AvailableBytes, obs.NodeFS.CapacityBytes, true, obs.NodeFS.CapacityBytes > 0
	case SignalNodeFSInodesFree:
		return obs.NodeFS.InodesFree, obs.NodeFS.Inodes, false, obs.NodeFS.Inodes > 0
	case SignalImageFSAvailable:
		return obs.ImageFS.AvailableBytes, obs.ImageFS.CapacityBytes, true, obs.ImageFS.CapacityBytes > 0
	case SignalImageFSInodesFree:
		return obs.ImageFS.InodesFree, obs.ImageFS.Inodes, false, obs.ImageFS.Inodes > 0
	case SignalPIDAvailable:
		return obs.PIDs.Available(), obs.PIDs.Max, false, obs.PIDs.Max > 0
	}
	return 0, 0, false, false
}

// pressure describes one pressure condition: the signals that judge it,
// its reasons and messages.
type pressure struct {
	typ                     string
	signals                 []Signal
	reasonTrue, reasonFalse string
	messageFalse            string
	// unreadable says what could not be read when a signal is unknown.
	unreadable string
}

var (
	memoryPressure = pressure{api.NodeMemoryPressure, []Signal{SignalMemoryAvailable},
		ReasonInsufficientMemory, ReasonSufficientMemory, sufficientMemoryMessage, "/proc/meminfo could not be read"}
	diskPressure = pressure{api.NodeDiskPressure,
		[]Signal{SignalNodeFSAvailable, SignalNodeFSInodesFree, SignalImageFSAvailable, SignalImageFSInodesFree},
		ReasonDiskPressure, ReasonNoDiskPressure, noDiskPressureMessage, "statfs failed"}
	pidPressure = pressure{api.NodePIDPressure, []Signal{SignalPIDAvailable},
		ReasonInsufficientPID, ReasonSufficientPID, sufficientPIDMessage, "pid_max or the number of tasks could not be read"}
)

// condition judges p: a signal that crosses its threshold is pressure even
// when another is unknown; else an unknown signal makes it Unknown.
func (p pressure) condition(obs Observation, ts []Threshold) api.NodeCondition {
	msgs, unobserved := crossing(obs, ts, p.signals...)
	switch {
	case len(msgs) > 0:
		return cond(p.typ, true, p.reasonTrue, strings.Join(msgs, "; "))
	case len(unobserved) > 0:
		return unknown(p.typ, strings.Join(unobserved, ", ")+" not observed: "+p.unreadable)
	}
	return cond(p.typ, false, p.reasonFalse, p.messageFalse)
}

// amount writes bytes in binary units with one decimal ("79.5Mi"), counts
// as they are. Decimals are cut, not rounded, so an amount under a
// threshold never reads as equal to it.
func amount(v int64, bytes bool) string {
	if !bytes {
		return strconv.FormatInt(v, 10)
	}
	units := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	f, i := float64(v), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatInt(v, 10)
	}
	return strconv.FormatFloat(math.Floor(f*10)/10, 'f', 1, 64) + units[i]
}

func percent(v, total int64) string {
	if total <= 0 {
		return "?%"
	}
	return strconv.FormatFloat(math.Floor(float64(v)*1000/float64(total))/10, 'f', 1, 64) + "%"
}
