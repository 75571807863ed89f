package raftstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter lets hashicorp/raft log into the injected slog.Logger with
// key/value fields. raft is chatty at INFO (every snapshot, every pipeline
// start), so INFO goes to slog's Debug except the messages an operator
// wants to see: leadership and membership changes.
type hclogAdapter struct {
	l       *slog.Logger
	name    string
	implied []any
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHCLog(l *slog.Logger) *hclogAdapter { return &hclogAdapter{l: l} }

// infoKept lists prefixes of raft INFO messages that stay at slog Info.
var infoKept = []string{
	"entering leader state",
	"entering follower state",
	"entering candidate state",
	"election won",
	"updating configuration",
	"added peer",
	"removed peer",
	"removed ourself",
	"Installed remote snapshot",
}

func slogLevel(level hclog.Level, msg string) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		for _, p := range infoKept {
			if strings.HasPrefix(msg, p) {
				return slog.LevelInfo
			}
		}
		return slog.LevelDebug
	}
}

// Log implements hclog.Logger.
func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	lv := slogLevel(level, msg)
	if lv == slog.LevelWarn && strings.HasPrefix(msg, "heartbeat timeout reached, starting election") && !knewLeader(args) {
		// Every start of a server elects its first leader this way:
		// a warning only when a leader it had went silent.
		lv = slog.LevelInfo
	}
	ctx := context.Background()
	if !h.l.Enabled(ctx, lv) {
		return
	}
	h.l.Log(ctx, lv, msg, convertArgs(args)...)
}

// knewLeader reports whether raft's election message names the leader
// that went silent (its "last-leader-id"); at a start there is none.
func knewLeader(args []any) bool {
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == "last-leader-id" {
			return fmt.Sprint(args[i+1]) != ""
		}
	}
	return false
}

// convertArgs turns hclog's alternating key/values into slog arguments,
// rendering values that slog's JSON handler would mangle (errors, raft's
// Stringer types, hclog.Format) as strings.
func convertArgs(args []any) []any {
	out := make([]any, 0, len(args))
	for i := 0; i < len(args); i += 2 {
		key, ok := args[i].(string)
		if !ok {
			key = fmt.Sprint(args[i])
		}
		if i+1 >= len(args) {
			out = append(out, slog.Any("EXTRA_VALUE_AT_END", args[i]))
			break
		}
		out = append(out, slog.Any(key, logValue(args[i+1])))
	}
	return out
}

func logValue(v any) any {
	switch x := v.(type) {
	case nil, string, bool, int, int64, uint64, uint32, int32, float64:
		return x
	case error:
		return x.Error()
	case hclog.Format:
		if len(x) == 0 {
			return ""
		}
		f, _ := x[0].(string)
		return fmt.Sprintf(f, x[1:]...)
	case fmt.Stringer:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}

func (h *hclogAdapter) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

// IsTrace reports whether trace messages would be written.
func (h *hclogAdapter) IsTrace() bool { return h.l.Enabled(context.Background(), slog.LevelDebug-4) }

// IsDebug reports whether debug messages would be written.
func (h *hclogAdapter) IsDebug() bool { return h.l.Enabled(context.Background(), slog.LevelDebug) }

// IsInfo reports whether info messages would be written.
func (h *hclogAdapter) IsInfo() bool { return h.l.Enabled(context.Background(), slog.LevelInfo) }

// IsWarn reports whether warnings would be written.
func (h *hclogAdapter) IsWarn() bool { return h.l.Enabled(context.Background(), slog.LevelWarn) }

// IsError reports whether errors would be written.
func (h *hclogAdapter) IsError() bool { return h.l.Enabled(context.Background(), slog.LevelError) }

func (h *hclogAdapter) ImpliedArgs() []any { return h.implied }

func (h *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{
		l:       h.l.With(convertArgs(args)...),
		name:    h.name,
		implied: append(append([]any{}, h.implied...), args...),
	}
}

func (h *hclogAdapter) Name() string { return h.name }

func (h *hclogAdapter) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return h.ResetNamed(name)
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{l: h.l.With("logger", name), name: name, implied: h.implied}
}

// SetLevel is a no-op: the slog handler decides what is written.
func (h *hclogAdapter) SetLevel(hclog.Level) {}

func (h *hclogAdapter) GetLevel() hclog.Level {
	switch {
	case h.IsTrace():
		return hclog.Trace
	case h.IsDebug():
		return hclog.Debug
	case h.IsInfo():
		return hclog.Info
	case h.IsWarn():
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func (h *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return lineWriter{h}
}

type lineWriter struct{ h *hclogAdapter }

func (w lineWriter) Write(p []byte) (int, error) {
	w.h.Log(hclog.Info, string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
