package server

import (
	"github.com/outpost-edge/outpost/controlplane/admission"
)

// Admission operations, the op argument of Admit (see package admission).
const (
	OpCreate       = admission.OpCreate
	OpUpdate       = admission.OpUpdate
	OpUpdateStatus = admission.OpUpdateStatus
	OpBind         = admission.OpBind
	OpDelete       = admission.OpDelete
)

// Admission is one step of the admission chain (admission.Interface).
type Admission = admission.Interface

// AdmissionScope is an Admission step that acts only on some requests
// (admission.Scope). The core asks it before it reads and copies the
// stored object for a delete or a binding, which most requests then skip.
type AdmissionScope = admission.Scope
