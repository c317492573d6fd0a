//go:build cgo

package stream_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// objectStoreExample is one of the durability examples keeping their log
// in an S3 bucket: its bucket and count as written, the count it runs
// with here, the row it writes (none for drop) and its prefix and node.
type objectStoreExample struct {
	bucket, count, shortCount, row, prefix, node string
	rows                                         int
}

// runObjectStoreExample runs one against MinIO (ARKFLOW_TEST_S3_*): a
// bucket of its own in place of the example's, the credentials through
// the ${AWS_…} variables (or in place of minioadmin), the count cut to
// keep the test short. Every row comes out, and the bucket holds the log
// under the example's prefix and node_id.
func runObjectStoreExample(ex objectStoreExample) func(t *testing.T, yaml string) {
	return func(t *testing.T, yaml string) {
		endpoint := serverEnv(t, "ARKFLOW_TEST_S3_ENDPOINT")
		access, secret := serverEnv(t, "ARKFLOW_TEST_S3_ACCESS_KEY"), serverEnv(t, "ARKFLOW_TEST_S3_SECRET_KEY")
		t.Setenv("AWS_ACCESS_KEY_ID", access)
		t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
		c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(access, secret, "")})
		if err != nil {
			t.Fatal(err)
		}
		bucket := strings.ToLower(fmt.Sprintf("ex-wal-%d-%d", time.Now().UnixNano()%1e9, uniqueSeq.Add(1)))
		if err := c.MakeBucket(context.Background(), bucket, minio.MakeBucketOptions{}); err != nil {
			t.Fatal(err)
		}
		yaml = substitute(t, yaml, `bucket: "`+ex.bucket+`"`, `bucket: "`+bucket+`"`, `"http://localhost:9000"`, `"http://`+endpoint+`"`, ex.count, ex.shortCount)
		if strings.Contains(yaml, `"minioadmin"`) {
			yaml = substitute(t, yaml, `access_key_id: "minioadmin"`, `access_key_id: "`+access+`"`, `secret_access_key: "minioadmin"`, `secret_access_key: "`+secret+`"`)
		}
		r := startExample(t, yaml)
		r.wait(t)
		if ex.row != "" {
			checkLines(t, r.stdout.lines(), repeated(ex.row, ex.rows))
		}
		var keys []string
		for obj := range c.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
			if obj.Err != nil {
				t.Fatal(obj.Err)
			}
			keys = append(keys, obj.Key)
		}
		if want := ex.prefix + "/" + ex.node + "/"; len(keys) == 0 || !strings.HasPrefix(keys[0], want) {
			t.Fatalf("objects in the bucket %q, want them under %s", keys, want)
		}
	}
}

// redis_temporary_example: the generated sensor rows (a count bounds the
// endless input, the 5s interval shortened) joined, by the right join
// of its query, with the JSON object stored at the key "test" in Redis,
// whose x is the sensor: every row comes out with both sides' fields.
func runRedisTemporaryExample(t *testing.T, yaml string) {
	url := serverEnv(t, "ARKFLOW_TEST_REDIS_URL")
	c := redisClient(t, url)
	if err := c.Set(context.Background(), "test", `{"x": "temp_1", "room": "hall"}`, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	yaml = substitute(t, yaml, "redis://127.0.0.1:6379", url, "interval: 5s", "interval: 10ms", "batch_size: 2\n", "batch_size: 2\n      count: 6\n")
	r := startExample(t, yaml)
	r.wait(t)
	checkLines(t, r.stdout.lines(), repeated(`{"timestamp":1625000000000,"value":10,"sensor":"temp_1","x":"temp_1","room":"hall"}`, 6))
}
