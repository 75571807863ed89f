package gossip

import (
	"context"
	"log/slog"
	"strings"
)

// logWriter turns memberlist's std-log lines ("[WARN] memberlist: ...")
// into slog records at the level their prefix names.
type logWriter struct{ log *slog.Logger }

// levels maps memberlist's prefixes to slog levels.
var levels = []struct {
	prefix string
	level  slog.Level
}{
	{"[DEBUG]", slog.LevelDebug},
	{"[TRACE]", slog.LevelDebug},
	{"[INFO]", slog.LevelInfo},
	{"[WARN]", slog.LevelWarn},
	{"[ERR]", slog.LevelError},
	{"[ERROR]", slog.LevelError},
}

func (w logWriter) Write(b []byte) (int, error) {
	line := strings.TrimSpace(string(b))
	lvl := slog.LevelInfo
	for _, l := range levels {
		if rest, ok := strings.CutPrefix(line, l.prefix); ok {
			line, lvl = strings.TrimSpace(rest), l.level
			break
		}
	}
	if lvl >= slog.LevelWarn && strings.Contains(line, "use of closed network connection") {
		// A send racing the pool's own shutdown: every stop has one,
		// and nothing is wrong.
		lvl = slog.LevelDebug
	}
	ctx := context.Background()
	if w.log.Enabled(ctx, lvl) {
		w.log.Log(ctx, lvl, strings.TrimPrefix(line, "memberlist: "), "source", "memberlist")
	}
	return len(b), nil
}
