package client

import (
	"net/http"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// warningsOf returns a reply's warnings in the api package's form.
func warningsOf(h http.Header) api.Warnings {
	ws := ParseWarnings(h)
	if len(ws) == 0 {
		return nil
	}
	return api.Warnings(ws)
}
