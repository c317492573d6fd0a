// Command kfake runs franz-go's in-process Kafka-protocol broker on
// 127.0.0.1 for the test suite (it handles idempotent and transactional
// producers, SendOffsetsToTransaction and read_committed with librdkafka).
// It prints "ready BROKERS" on stdout once listening and runs until killed.
//
// It lives in its own module so that franz-go never enters the library's
// go.mod.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 0, "first port (0 = any free port); brokers use consecutive ports")
	brokers := flag.Int("brokers", 1, "number of brokers")
	partitions := flag.Int("partitions", 4, "default partitions of auto-created topics")
	flag.Parse()
	opts := []kfake.Opt{
		kfake.NumBrokers(*brokers),
		kfake.DefaultNumPartitions(*partitions),
		kfake.AllowAutoTopicCreation(),
	}
	if *port != 0 {
		ports := make([]int, *brokers)
		for i := range ports {
			ports[i] = *port + i
		}
		opts = append(opts, kfake.Ports(ports...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake:", err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Println("ready", strings.Join(c.ListenAddrs(), ","))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
