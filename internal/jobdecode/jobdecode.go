// Package jobdecode hands the internal packages that check specs what
// package job keeps unexported in a spec: the problems job.Parse found
// decoding it. A spec remembers them so that validating it reports them
// with every other mistake; they are not part of job's API.
//
// The function is set by package job when it is initialised, so it is
// set in every program that has a *job.Spec; it takes any because this
// package cannot import job (job imports it).
package jobdecode

// Problems returns the decode problems of spec, a *job.Spec, as
// job.ValidationErrors (nil when the spec decoded whole or was built in
// Go).
var Problems func(spec any) any
