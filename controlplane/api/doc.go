// Package api holds outpost's object types in the Kubernetes shapes
// (apiVersion, kind, metadata, spec, status), together with their
// defaulting, validation and strict decoding, and the label and field
// selectors that lists, watches and the scheduler match them with.
//
// The types carry the fields outpost acts on. Fields that Kubernetes has but
// outpost does not act on are known to the decoder (see known.go), which
// accepts them with a warning so that manifests written for Kubernetes load
// as they are; a field Kubernetes does not have either is refused with its
// path.
//
// Every layer reports problems the Kubernetes way, so that users and
// clients written for Kubernetes understand them: field errors by path
// ("spec.containers[0].image: Required value") gathered into one 422
// *StatusError, malformed bodies as a 400 that says where.
package api
