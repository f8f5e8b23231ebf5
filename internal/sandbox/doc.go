// Package sandbox defines what a computer is to the rest of Cubicle: a
// Driver that creates computers from a Spec, and the Sandbox interface to run
// processes and move files in one. Implementations live in subpackages
// (internal/sandbox/linux). It imports only internal/agent, whose wire types
// it shares.
package sandbox
