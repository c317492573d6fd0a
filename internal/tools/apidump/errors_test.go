package main

import (
	"go/types"
	"slices"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/kafka"
	"github.com/arkflow-rs/arkflow-go/connectors/mqtt"
	"github.com/arkflow-rs/arkflow-go/connectors/nats"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/connectors/redis"
	sqlconn "github.com/arkflow-rs/arkflow-go/connectors/sql"
	"github.com/arkflow-rs/arkflow-go/connectors/websocket"
	"github.com/arkflow-rs/arkflow-go/wal"
)

// sentinels are the exported error variables of the public packages, by
// "package.Name" (the package as code qualifies it). A new one must be
// added here, so that its text is checked.
var sentinels = map[string]error{
	"arkflow.ErrAlreadyRunning": arkflow.ErrAlreadyRunning,
	"arkflow.ErrNotRunning":     arkflow.ErrNotRunning,
	"arkflow.ErrCorrupt":        arkflow.ErrCorrupt,
	"arkflow.ErrNoCheckpoints":  arkflow.ErrNoCheckpoints,
	"arkflow.ErrNotQueryable":   arkflow.ErrNotQueryable,
	"arkflow.ErrKeyType":        arkflow.ErrKeyType,
	"arkflow.ErrBadCursor":      arkflow.ErrBadCursor,
	"checkpoint.ErrCorrupt":     checkpoint.ErrCorrupt,
	"checkpoint.ErrNotFound":    checkpoint.ErrNotFound,
	"connectors.ErrEndOfInput":  connectors.ErrEndOfInput,
	"kafka.ErrFenced":           kafka.ErrFenced,
	"kafka.ErrUnpairedGroup":    kafka.ErrUnpairedGroup,
	"kafka.ErrInstanceFenced":   kafka.ErrInstanceFenced,
	"kafka.ErrClosed":           kafka.ErrClosed,
	"mqtt.ErrClosed":            mqtt.ErrClosed,
	"nats.ErrClosed":            nats.ErrClosed,
	"push.ErrStopped":           push.ErrStopped,
	"push.ErrClosed":            push.ErrClosed,
	"redis.ErrClosed":           redis.ErrClosed,
	"sql.ErrClosed":             sqlconn.ErrClosed,
	"wal.ErrCorrupt":            wal.ErrCorrupt,
	"websocket.ErrClosed":       websocket.ErrClosed,
}

// sameAs are the sentinels that are, by their documentation, the same
// value as another package's: the module has one corruption marker, so
// errors.Is(err, checkpoint.ErrCorrupt) matches a WAL's corruption too.
// They carry the text of the one they are.
var sameAs = map[string]string{
	"checkpoint.ErrCorrupt": "arkflow.ErrCorrupt",
	"wal.ErrCorrupt":        "arkflow.ErrCorrupt",
}

// Every exported error variable of a public package has a text that
// starts with its package's name and a colon ("push: the source is
// closed"), so that a message printed far from its origin says where it
// came from; the list above is checked against the packages' export data,
// so a new sentinel cannot skip the check.
func TestSentinelErrorsNameTheirPackage(t *testing.T) {
	errType := types.Universe.Lookup("error").Type().Underlying().(*types.Interface)
	var found []string
	for _, p := range packages(t) {
		scope := p.Types.Scope()
		for _, name := range scope.Names() {
			v, ok := scope.Lookup(name).(*types.Var)
			if !ok || !v.Exported() || !types.Implements(v.Type(), errType) {
				continue
			}
			found = append(found, p.Types.Name()+"."+name)
		}
	}
	slices.Sort(found)
	var listed []string
	for name := range sentinels {
		listed = append(listed, name)
	}
	slices.Sort(listed)
	if !slices.Equal(found, listed) {
		t.Fatalf("the public packages export the error variables\n\t%s\nbut this test lists\n\t%s",
			strings.Join(found, "\n\t"), strings.Join(listed, "\n\t"))
	}
	for _, name := range listed {
		err := sentinels[name]
		pkg, _, _ := strings.Cut(name, ".")
		if other, ok := sameAs[name]; ok {
			if err != sentinels[other] {
				t.Errorf("%s is documented as the same value as %s, and is not", name, other)
			}
			pkg, _, _ = strings.Cut(other, ".")
		}
		if !strings.HasPrefix(err.Error(), pkg+": ") {
			t.Errorf("%s's text %q does not start with %q", name, err.Error(), pkg+": ")
		}
	}
}
