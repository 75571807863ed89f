package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Status is the body of every error reply, in the Kubernetes shape, so that
// clients written for Kubernetes can read it.
type Status struct {
	TypeMeta `json:",inline"`
	ListMeta `json:"metadata,omitzero"`
	Status   string         `json:"status,omitempty"` // "Success" or "Failure"
	Message  string         `json:"message,omitempty"`
	Reason   string         `json:"reason,omitempty"`
	Details  *StatusDetails `json:"details,omitempty"`
	Code     int32          `json:"code,omitempty"`
}

// StatusDetails names the object and lists every problem with it.
type StatusDetails struct {
	Name   string        `json:"name,omitempty"`
	Group  string        `json:"group,omitempty"`
	Kind   string        `json:"kind,omitempty"`
	UID    string        `json:"uid,omitempty"`
	Causes []StatusCause `json:"causes,omitempty"`
	// RetryAfterSeconds is set on 429 and 503 replies.
	RetryAfterSeconds int32 `json:"retryAfterSeconds,omitempty"`
}

// StatusCause is one problem, by field path.
type StatusCause struct {
	Type    string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	Field   string `json:"field,omitempty"`
}

// Status reasons, as Kubernetes names them.
const (
	ReasonBadRequest         = "BadRequest"
	ReasonUnauthorized       = "Unauthorized"
	ReasonForbidden          = "Forbidden"
	ReasonNotFound           = "NotFound"
	ReasonAlreadyExists      = "AlreadyExists"
	ReasonConflict           = "Conflict"
	ReasonGone               = "Expired"
	ReasonInvalid            = "Invalid"
	ReasonTimeout            = "Timeout"
	ReasonTooManyRequests    = "TooManyRequests"
	ReasonRequestTooLarge    = "RequestEntityTooLarge"
	ReasonMethodNotAllowed   = "MethodNotAllowed"
	ReasonUnsupportedMedia   = "UnsupportedMediaType"
	ReasonInternalError      = "InternalError"
	ReasonServiceUnavailable = "ServiceUnavailable"
)

// StatusError is an error that carries the Status to reply with. Every
// layer (decoder, validation, admission, store) returns one, so the server
// writes it as it is and the client turns it back into the same error.
type StatusError struct {
	Status Status
}

func (e *StatusError) Error() string { return e.Status.Message }

// Code is the HTTP status code of the error.
func (e *StatusError) Code() int { return int(e.Status.Code) }

// newStatusError builds a failure Status.
func newStatusError(code int, reason, msg string) *StatusError {
	return &StatusError{Status: Status{
		TypeMeta: TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   "Failure", Code: int32(code), Reason: reason, Message: msg,
	}}
}

// qualifiedName names r's objects in messages as Kubernetes does: the
// plural, with the group when not core ("pods", "deployments.apps").
func qualifiedName(r *Resource) string {
	if r.Group == "" {
		return r.Plural
	}
	return r.Plural + "." + r.Group
}

// NewNotFound says that kind/name does not exist.
func NewNotFound(r *Resource, name string) *StatusError {
	e := newStatusError(http.StatusNotFound, ReasonNotFound, fmt.Sprintf("%s %q not found", qualifiedName(r), name))
	e.Status.Details = &StatusDetails{Name: name, Group: r.Group, Kind: r.Plural}
	return e
}

// NewAlreadyExists says that kind/name exists already.
func NewAlreadyExists(r *Resource, name string) *StatusError {
	e := newStatusError(http.StatusConflict, ReasonAlreadyExists, fmt.Sprintf("%s %q already exists", qualifiedName(r), name))
	e.Status.Details = &StatusDetails{Name: name, Group: r.Group, Kind: r.Plural}
	return e
}

// NewConflict says that a write lost a race (a stale resourceVersion).
func NewConflict(r *Resource, name, why string) *StatusError {
	e := newStatusError(http.StatusConflict, ReasonConflict,
		fmt.Sprintf("Operation cannot be fulfilled on %s %q: %s", qualifiedName(r), name, why))
	e.Status.Details = &StatusDetails{Name: name, Group: r.Group, Kind: r.Plural}
	return e
}

// NewGone says that a watch asked for history older than is kept.
func NewGone(msg string) *StatusError {
	return newStatusError(http.StatusGone, ReasonGone, msg)
}

// NewBadRequest is a request the server cannot read.
func NewBadRequest(msg string) *StatusError {
	return newStatusError(http.StatusBadRequest, ReasonBadRequest, msg)
}

// NewUnauthorized is a request without valid credentials.
func NewUnauthorized(msg string) *StatusError {
	return newStatusError(http.StatusUnauthorized, ReasonUnauthorized, msg)
}

// NewForbidden is a request the caller's role does not allow.
func NewForbidden(msg string) *StatusError {
	return newStatusError(http.StatusForbidden, ReasonForbidden, msg)
}

// NewMethodNotAllowed is a verb the resource does not support.
func NewMethodNotAllowed(msg string) *StatusError {
	return newStatusError(http.StatusMethodNotAllowed, ReasonMethodNotAllowed, msg)
}

// NewRequestTooLarge is a body over the size limit.
func NewRequestTooLarge(msg string) *StatusError {
	return newStatusError(http.StatusRequestEntityTooLarge, ReasonRequestTooLarge, msg)
}

// NewInternalError wraps an unexpected failure.
func NewInternalError(err error) *StatusError {
	return newStatusError(http.StatusInternalServerError, ReasonInternalError, "Internal error occurred: "+err.Error())
}

// NewServiceUnavailable is a temporary failure: no leader, shutting down.
func NewServiceUnavailable(msg string) *StatusError {
	return newStatusError(http.StatusServiceUnavailable, ReasonServiceUnavailable, msg)
}

// NewTimeout is a request that did not finish in time; it may still apply.
func NewTimeout(msg string) *StatusError {
	return newStatusError(http.StatusGatewayTimeout, ReasonTimeout, msg)
}

// NewTooManyRequests is a refusal to be retried later (429), with its
// causes.
func NewTooManyRequests(msg string, details *StatusDetails) *StatusError {
	e := newStatusError(http.StatusTooManyRequests, ReasonTooManyRequests, msg)
	e.Status.Details = details
	return e
}

// NewInvalid lists every field problem of kind/name as one 422 error:
// `Pod "x" is invalid: [spec.containers[0].name: Required value, ...]`.
func NewInvalid(kind, name string, errs ErrorList) *StatusError {
	causes := make([]StatusCause, 0, len(errs))
	msgs := make([]string, 0, len(errs))
	for _, fe := range errs {
		causes = append(causes, StatusCause{Type: fe.Type, Message: fe.ErrorBody(), Field: fe.Field})
		msgs = append(msgs, fe.Error())
	}
	msg := fmt.Sprintf("%s %q is invalid: ", kind, name)
	if len(msgs) == 1 {
		msg += msgs[0]
	} else {
		msg += "[" + strings.Join(msgs, ", ") + "]"
	}
	e := newStatusError(http.StatusUnprocessableEntity, ReasonInvalid, msg)
	e.Status.Details = &StatusDetails{Name: name, Kind: kind, Causes: causes}
	return e
}

// ReasonOf returns the Status reason of err, or "" if it carries none.
func ReasonOf(err error) string {
	if se, ok := errors.AsType[*StatusError](err); ok {
		return se.Status.Reason
	}
	return ""
}

// IsNotFound reports whether err says an object does not exist.
func IsNotFound(err error) bool { return ReasonOf(err) == ReasonNotFound }

// IsAlreadyExists reports whether err says an object exists already.
func IsAlreadyExists(err error) bool { return ReasonOf(err) == ReasonAlreadyExists }

// IsConflict reports whether err is a stale-resourceVersion conflict.
func IsConflict(err error) bool { return ReasonOf(err) == ReasonConflict }

// IsGone reports whether err says the asked-for history is no longer kept.
func IsGone(err error) bool { return ReasonOf(err) == ReasonGone }

// IsInvalid reports whether err lists field problems.
func IsInvalid(err error) bool { return ReasonOf(err) == ReasonInvalid }
