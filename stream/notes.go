package stream

import (
	"encoding/json"
	"regexp"

	"github.com/arkflow-rs/arkflow-go/internal/config"
)

// Note is advice about a valid Stream config: something that runs as
// written but would be better as a Job.
type Note struct {
	// Path is the key the note is about, e.g. streams[0].buffer.
	Path string
	Text string
}

// aggregate finds a query that aggregates (GROUP BY or a common
// aggregate function).
var aggregate = regexp.MustCompile(`(?i)\bgroup\s+by\b|\b(sum|count|avg|min|max)\s*\(`)

// Notes returns migration advice for cfg: streams that window or
// aggregate by processing time, which a Job does by event time with
// watermarks, late rows and state in checkpoints. Notes are not errors;
// arkflow validate prints them after its ok line.
func Notes(cfg *Config) []Note {
	var out []Note
	for i := range cfg.Streams {
		s := &cfg.Streams[i]
		base := config.Index("streams", i)
		if walTuned(s.Durability) {
			out = append(out, Note{config.Join(base, "durability.backend"), "segment, cursor, segment_tuning, parallel_put and compression tune ArkFlow's object-store log and are not used here: this log makes its appends durable as sync says (group_commit: each batch before it goes on; periodic: every interval)"})
		}
		if b := s.Buffer; b != nil {
			switch b.Type {
			case "tumbling_window", "session_window", "sliding_window":
				out = append(out, Note{config.Join(base, "buffer"), "this " + b.Type + " groups rows by when they arrive (processing time), and its rows live in memory only: for windows by event time, with watermarks, late rows and window state in checkpoints, write the stream as a Job with a window operator (arkflow plan shows it)"})
				continue
			}
		}
		for j, p := range s.Pipeline.Processors {
			if p.Type != "sql" {
				continue
			}
			var q struct {
				Query string `json:"query"`
			}
			if json.Unmarshal(p.Config, &q) == nil && aggregate.MatchString(q.Query) {
				out = append(out, Note{config.Join(config.Index(config.Join(base, "pipeline.processors"), j), "query"), "this query aggregates each batch on its own; for totals per key across batches, by event-time window, write the stream as a Job with a window or keyed operator"})
				break
			}
		}
	}
	return out
}
