package hubwire

import (
	"errors"
	"fmt"
)

// Capability list limits (B.1): at most MaxCapabilities names, each 1 to
// MaxCapabilityLen characters from [A-Za-z0-9._-].
const (
	MaxCapabilities  = 32
	MaxCapabilityLen = 64
)

// ErrInvalidCapabilities is wrapped by ValidateCapabilities.
var ErrInvalidCapabilities = errors.New("hubwire: invalid capabilities")

// ValidCapability reports whether name is a well-formed capability name.
func ValidCapability(name string) bool {
	if len(name) == 0 || len(name) > MaxCapabilityLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// ValidateCapabilities returns an error naming the first malformed or
// duplicate entry, or saying the list is longer than MaxCapabilities. Our
// Hub uses it to reject a registration outright and tell the Agent why.
func ValidateCapabilities(names []string) error {
	if len(names) > MaxCapabilities {
		return fmt.Errorf("%w: %d entries, at most %d allowed", ErrInvalidCapabilities, len(names), MaxCapabilities)
	}
	seen := make(map[string]struct{}, len(names))
	for i, n := range names {
		if !ValidCapability(n) {
			return fmt.Errorf("%w: entry %d %q must be 1-%d characters of [A-Za-z0-9._-]", ErrInvalidCapabilities, i, n, MaxCapabilityLen)
		}
		if _, dup := seen[n]; dup {
			return fmt.Errorf("%w: entry %d %q is a duplicate", ErrInvalidCapabilities, i, n)
		}
		seen[n] = struct{}{}
	}
	return nil
}

// FilterCapabilities is v1's lenient rule: it drops malformed entries and
// duplicates silently and keeps the first MaxCapabilities of the rest, in
// order. The result is never nil.
func FilterCapabilities(names []string) []string {
	out := make([]string, 0, min(len(names), MaxCapabilities))
	seen := make(map[string]struct{}, len(names))
	for _, n := range names {
		if len(out) == MaxCapabilities {
			break
		}
		if !ValidCapability(n) {
			continue
		}
		if _, dup := seen[n]; dup {
			continue
		}
		seen[n] = struct{}{}
		out = append(out, n)
	}
	return out
}

// MissingCapabilities returns the entries of required that have lacks,
// in order; nil when none is missing.
func MissingCapabilities(required, have []string) []string {
	set := make(map[string]struct{}, len(have))
	for _, h := range have {
		set[h] = struct{}{}
	}
	var missing []string
	for _, r := range required {
		if _, ok := set[r]; !ok {
			missing = append(missing, r)
		}
	}
	return missing
}
