package job_test

import (
	"encoding/json"
	"fmt"
	"log"

	"github.com/arkflow-rs/arkflow-go/job"
)

// Running and Final write the aggregate operator's spec config; the
// aggregates are the values a window takes too.
func ExampleFinal() {
	for _, a := range []job.Aggregation{
		job.Running(job.Count("n")),
		job.Final(job.Count("n"), job.Sum("amount", "total")),
	} {
		b, err := json.Marshal(a)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(b))
	}
	// Output:
	// {"aggregates":[{"function":"count","as":"n"}]}
	// {"aggregates":[{"function":"count","as":"n"},{"function":"sum","field":"amount","as":"total"}],"emit":"final"}
}
