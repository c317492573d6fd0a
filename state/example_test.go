package state_test

import (
	"context"
	"fmt"
	"log"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/state"
)

type view struct {
	User string `arkflow:"user"`
	Page string `arkflow:"page"`
}

type count struct {
	User  string `arkflow:"user"`
	Page  string `arkflow:"page"`
	Views int64  `arkflow:"views"` // this user's views of this page so far
	Pages int    `arkflow:"pages"` // distinct pages this user has seen
}

// views is, per user, a map from page to the number of views.
var views = state.NewMap[string, int64]("views")

// countViews emits a count for every view, kept in the user's Map.
func countViews(_ context.Context, pc *arkflow.ProcessContext, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	rows, err := arkflow.Decode[view](rec)
	if err != nil {
		return nil, err
	}
	out := make([]count, len(rows))
	for i, r := range rows {
		k, err := pc.State(i) // the state of row i's key: its user
		if err != nil {
			return nil, err
		}
		n, _, err := views.Get(k, r.Page)
		if err != nil {
			return nil, err
		}
		if err := views.Put(k, r.Page, n+1); err != nil {
			return nil, err
		}
		pages := 0
		if err := views.Range(k, func(string, int64) bool { pages++; return true }); err != nil {
			return nil, err
		}
		out[i] = count{User: r.User, Page: r.Page, Views: n + 1, Pages: pages}
	}
	return arkflow.Encode(out)
}

// A Process operator keeps a Map per user: the job is keyed by user, and
// each row reads and writes its own user's map.
func Example() {
	in, err := arkflow.Encode([]view{{"ann", "/"}, {"bob", "/"}, {"ann", "/docs"}, {"ann", "/"}})
	if err != nil {
		log.Fatal(err)
	}
	src, err := mem.NewSourceFrom([]arrow.RecordBatch{in})
	if err != nil {
		log.Fatal(err)
	}
	schema, err := arkflow.SchemaOf[count]()
	if err != nil {
		log.Fatal(err)
	}
	j, err := arkflow.NewJob("views").
		Source("in", src).
		KeyBy("user").
		Process("count", countViews, arkflow.WithSchema(schema)).
		Sink("out", funcsink.Func[count](func(_ context.Context, rows []count) error {
			for _, c := range rows {
				fmt.Printf("%s %s views=%d pages=%d\n", c.User, c.Page, c.Views, c.Pages)
			}
			return nil
		})).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// ann / views=1 pages=1
	// bob / views=1 pages=1
	// ann /docs views=1 pages=2
	// ann / views=2 pages=2
}
