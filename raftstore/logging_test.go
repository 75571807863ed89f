package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func TestHCLogAdapterLevelsAndFields(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h := newHCLog(l).Named("raft").With("node", "s1")

	h.Info("entering leader state", "leader", raft.ServerAddress("127.0.0.1:1"))
	h.Info("starting snapshot up to", "index", uint64(7)) // chatty: debug
	h.Debug("debug detail")
	h.Warn("failed to contact", "server-id", raft.ServerID("s2"), "error", errors.New("boom"))
	h.Error("odd args", "only-key")
	// Issue 15 item 7: a start's first election is no warning; losing a
	// leader is.
	h.Warn("heartbeat timeout reached, starting election", "last-leader-addr", raft.ServerAddress(""), "last-leader-id", raft.ServerID(""))
	h.Warn("heartbeat timeout reached, starting election", "last-leader-addr", raft.ServerAddress("127.0.0.1:2"), "last-leader-id", raft.ServerID("s2"))

	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		m := map[string]any{}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 5 {
		t.Fatalf("got %d lines, want 5 (leadership info, warn, error, two elections): %s", len(lines), buf.String())
	}
	if lines[3]["level"] != "INFO" || lines[4]["level"] != "WARN" || lines[4]["last-leader-id"] != "s2" {
		t.Errorf("elections: at a start %v, after a leader went silent %v; want INFO then WARN", lines[3], lines[4])
	}
	if lines[0]["msg"] != "entering leader state" || lines[0]["level"] != "INFO" || lines[0]["leader"] != "127.0.0.1:1" ||
		lines[0]["node"] != "s1" || lines[0]["logger"] != "raft" {
		t.Errorf("leadership line = %v", lines[0])
	}
	if lines[1]["level"] != "WARN" || lines[1]["error"] != "boom" || lines[1]["server-id"] != "s2" {
		t.Errorf("warn line = %v", lines[1])
	}
	if lines[2]["level"] != "ERROR" || lines[2]["EXTRA_VALUE_AT_END"] != "only-key" {
		t.Errorf("error line = %v", lines[2])
	}
	if h.IsDebug() || !h.IsInfo() || h.GetLevel() != hclog.Info {
		t.Errorf("levels: debug=%v info=%v level=%v", h.IsDebug(), h.IsInfo(), h.GetLevel())
	}
}

func TestDeliverLatestCoalesces(t *testing.T) {
	ch := make(chan bool, 1)
	deliverLatest(ch, true)
	deliverLatest(ch, false)
	deliverLatest(ch, true)
	if v := <-ch; !v {
		t.Fatal("receiver did not get the latest state")
	}
	select {
	case v := <-ch:
		t.Fatalf("stale value %v left behind", v)
	default:
	}
	deliverLatest(ch, false)
	if v := <-ch; v {
		t.Fatal("latest false lost")
	}
}
