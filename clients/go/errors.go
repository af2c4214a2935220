package ratelimit

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidArgument is what every *ArgumentError matches with errors.Is: a call refused before
// anything was sent.
var ErrInvalidArgument = errors.New("ratelimit: invalid argument")

// ErrLibraryNotLoaded is returned when the server has neither the module nor the Functions
// library, and the limiter was told not to load it (WithoutLibraryLoad).
var ErrLibraryNotLoaded = errors.New("ratelimit: the server has neither the ratelimit module nor its Functions library " +
	"(loadmodule .../libredis_ratelimit.so, or FUNCTION LOAD with LibrarySource())")

// ErrUnexpectedReply is what errors.Is finds in the error of a call whose reply had not the shape
// its command answers (a server of another version, or a proxy in between that changed it).
var ErrUnexpectedReply = errors.New("ratelimit: unexpected reply")

// ErrPermitUnavailable is returned by WithPermit when every permit of the key is in use. The error
// is a *PermitUnavailableError, which says how long until the first one ends.
var ErrPermitUnavailable = errors.New("ratelimit: no permit available")

// PermitUnavailableError is WithPermit's answer when every permit is in use.
type PermitUnavailableError struct {
	InUse, Limit int64
	// Wait is how long until the earliest lease ends, the soonest a permit frees itself.
	Wait time.Duration
}

func (e *PermitUnavailableError) Error() string {
	return fmt.Sprintf("ratelimit: no permit available: %d of %d in use, the first ends in %v", e.InUse, e.Limit, e.Wait)
}

// Is makes errors.Is(err, ErrPermitUnavailable) true.
func (e *PermitUnavailableError) Is(target error) bool { return target == ErrPermitUnavailable }

// ErrPermitLost is the cause a permit's work context is cancelled with when the lease ended
// before the work did (its renewal found it gone).
var ErrPermitLost = errors.New("ratelimit: permit lost before the work ended")

// ErrNotReplicated is what every *NotReplicatedError matches with errors.Is.
var ErrNotReplicated = errors.New("ratelimit: too few replicas acknowledged the write in time")

// NotReplicatedError is the error of a call a limiter waiting for replicas (WithReplicas) made
// on the primary, which answered (the call's answer is returned beside the error), but which
// fewer replicas than wanted acknowledged within the timeout. The write stands on the primary; a
// failover before the replicas catch up would lose it, and the limit would admit that much again.
type NotReplicatedError struct {
	Acknowledged, Wanted int
}

func (e *NotReplicatedError) Error() string {
	return fmt.Sprintf("ratelimit: %d of %d replicas acknowledged the write in time", e.Acknowledged, e.Wanted)
}

// Is makes errors.Is(err, ErrNotReplicated) true.
func (e *NotReplicatedError) Is(target error) bool { return target == ErrNotReplicated }

// ArgumentError is an argument refused before any round trip, worded as the server words it.
type ArgumentError struct {
	Message string
}

func (e *ArgumentError) Error() string { return "ratelimit: " + e.Message }

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

func invalid(message string) error { return &ArgumentError{Message: message} }

// ServerError is an error reply of the server ("ERR ...", "WRONGTYPE ...", "CROSSSLOT ...").
// Adapters return it for every error reply, so that one errors.As finds it whatever the client.
type ServerError struct {
	Message string
}

func (e *ServerError) Error() string { return e.Message }
