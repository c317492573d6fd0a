package websocket_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	ws "github.com/coder/websocket"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/websocket"
)

// Tick is a row of the feed.
type Tick struct {
	Symbol string  `arrow:"symbol"`
	Price  float64 `arrow:"price"`
}

// A job reads the ticks a WebSocket server sends, one JSON object per
// frame, into typed rows.
func Example() {
	// A feed that sends three ticks to each client.
	feed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := ws.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for _, t := range []string{`{"symbol":"ARK","price":1.5}`, `{"symbol":"GO","price":2}`, `{"symbol":"ARK","price":1.75}`} {
			if c.Write(r.Context(), ws.MessageText, []byte(t)) != nil {
				return
			}
		}
		_, _, _ = c.Read(r.Context()) // until the client goes
	}))
	defer feed.Close()

	ctx := context.Background()
	var got []Tick
	done := make(chan struct{})
	j, err := arkflow.NewJob("ticks").
		Source("feed", websocket.SourceConfig{
			URL:    "ws" + strings.TrimPrefix(feed.URL, "http"),
			Schema: connectors.Schema{{Name: "symbol", Type: "string"}, {Name: "price", Type: "float64"}},
		}).
		Sink("out", funcsink.Func[Tick](func(_ context.Context, rows []Tick) error {
			if got = append(got, rows...); len(got) == 3 {
				close(done)
			}
			return nil
		})).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	go j.Run(ctx)
	<-done
	if err := j.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(got)
	// Output: [{ARK 1.5} {GO 2} {ARK 1.75}]
}
