package connectors

import (
	"fmt"
	"sync"
)

// Environment is a set of connector types and job checks. A job built with
// one (arkflow.WithEnvironment) finds its input and output types there
// instead of in the global registry, so a test or a control plane can add
// connectors for its jobs without changing what other jobs in the process
// see. The package-level RegisterInput, RegisterOutput and RegisterJobCheck
// write to the global one. An Environment is safe for concurrent use.
type Environment struct {
	mu      sync.RWMutex
	inputs  map[string]InputFactory
	outputs map[string]OutputFactory
	checks  []JobCheck
}

func newEnvironment() *Environment {
	return &Environment{inputs: map[string]InputFactory{}, outputs: map[string]OutputFactory{}}
}

// NewEnvironment returns an environment holding every connector type and
// job check registered globally so far (the built-in ones, and those of
// the connector packages the program imports). Registering into it leaves
// the global registry as it is.
func NewEnvironment() *Environment {
	e := newEnvironment()
	global.mu.RLock()
	defer global.mu.RUnlock()
	for k, f := range global.inputs {
		e.inputs[k] = f
	}
	for k, f := range global.outputs {
		e.outputs[k] = f
	}
	e.checks = append(e.checks, global.checks...)
	return e
}

// Global returns the global environment, the one the package-level
// functions use and jobs use by default.
func Global() *Environment { return global }

// RegisterInput makes an input type available to the jobs built with e.
// A name it already has is an error.
func (e *Environment) RegisterInput(name string, f InputFactory) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.inputs[name]; dup {
		return fmt.Errorf("connectors: input type registered twice: %s", name)
	}
	e.inputs[name] = f
	return nil
}

// RegisterOutput makes an output type available to the jobs built with e.
// A name it already has is an error.
func (e *Environment) RegisterOutput(name string, f OutputFactory) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.outputs[name]; dup {
		return fmt.Errorf("connectors: output type registered twice: %s", name)
	}
	e.outputs[name] = f
	return nil
}

// RegisterJobCheck adds a check every job built with e runs once all of
// its components are built.
func (e *Environment) RegisterJobCheck(f JobCheck) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.checks = append(e.checks, f)
}

// LookupInput returns the factory of an input type.
func (e *Environment) LookupInput(name string) (InputFactory, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	f, ok := e.inputs[name]
	return f, ok
}

// LookupOutput returns the factory of an output type.
func (e *Environment) LookupOutput(name string) (OutputFactory, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	f, ok := e.outputs[name]
	return f, ok
}

// InputTypes lists the input types, sorted.
func (e *Environment) InputTypes() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return sortedKeys(e.inputs)
}

// OutputTypes lists the output types, sorted.
func (e *Environment) OutputTypes() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return sortedKeys(e.outputs)
}

// JobChecks returns the job checks, in registration order.
func (e *Environment) JobChecks() []JobCheck {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return append([]JobCheck(nil), e.checks...)
}
