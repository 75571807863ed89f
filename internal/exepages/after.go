package exepages

import (
	"context"
	"log/slog"
	"time"
)

// StartupDelay is how long after start a server or agent trims: by then
// it has joined, restored its state and run each loop once, so what it
// maps again is what it keeps using.
const StartupDelay = 10 * time.Second

// TrimAfter waits d (or for ctx to end), then trims; log gets the result
// at debug level, as it changes nothing the user sees.
func TrimAfter(ctx context.Context, d time.Duration, log *slog.Logger) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	res, err := Trim()
	if err != nil {
		log.Debug("the binary's start-up pages were not trimmed", "err", err)
		return
	}
	log.Debug("the binary's start-up pages trimmed", "mappings", res.Mappings, "bytes", res.Bytes)
}
