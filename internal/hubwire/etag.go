package hubwire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Generation preconditions travel as If-Match: "generation-N" (quotes
// optional) and come back as ETag: "generation-N". A resource never
// written has generation 0.

const generationPrefix = "generation-"

// ErrInvalidGeneration is wrapped by ParseGeneration when a header value is
// not of the form "generation-N".
var ErrInvalidGeneration = errors.New(`hubwire: not a "generation-N" value`)

// FormatETag returns the ETag header value of generation gen, quoted:
// "generation-7".
func FormatETag(gen uint64) string {
	return `"` + generationPrefix + strconv.FormatUint(gen, 10) + `"`
}

// ParseGeneration parses an If-Match or ETag value "generation-N", with or
// without the surrounding double quotes, and returns N. Surrounding spaces
// are ignored. Weak validators (W/"..."), lists, "*", signs, and numbers
// that overflow uint64 are rejected.
func ParseGeneration(v string) (uint64, error) {
	s := strings.TrimSpace(v)
	if strings.HasPrefix(s, `"`) || strings.HasSuffix(s, `"`) {
		if len(s) < 2 || !strings.HasPrefix(s, `"`) || !strings.HasSuffix(s, `"`) {
			return 0, fmt.Errorf("%w: %q has unbalanced quotes", ErrInvalidGeneration, v)
		}
		s = s[1 : len(s)-1]
	}
	digits, ok := strings.CutPrefix(s, generationPrefix)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrInvalidGeneration, v)
	}
	if digits == "" {
		return 0, fmt.Errorf("%w: %q has no number", ErrInvalidGeneration, v)
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, fmt.Errorf("%w: %q", ErrInvalidGeneration, v)
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is out of range", ErrInvalidGeneration, v)
	}
	return n, nil
}
