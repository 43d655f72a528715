// tiered_reader reads partitions 0..n-1 of a topic from offset 0 with franz-go's kgo client,
// as any franz-go application would (nothing here knows of tiered storage), and prints one
// JSON line per record it is given, then exits once every partition is read to its end.
//
//	tiered_reader BOOTSTRAP TOPIC PARTITIONS read_committed|read_uncommitted
//
// A line: {"partition", "offset", "key", "value" (base64, null when absent), "headers"
// ([{"key", "value" (base64)}]), "timestamp" (ms), "timestamp_type" (0 CreateTime, 1
// LogAppendTime), "control"}. Control records (transaction markers) are printed too
// (KeepControlRecords), so the caller sees the markers the log has, and so that this program
// can tell when it is done: a read_committed consumer is never given aborted records, but every
// other offset below the end offset reaches it, data or marker. The end offsets come from the
// broker (ListOffsets latest with the same isolation level: the last stable offset for
// read_committed), asked before reading. Errors go to stderr with exit status 1.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The caller has its own timeout; this one only makes a hang end with a message saying where
// each partition got to.
const deadline = 90 * time.Second

type header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

type line struct {
	Partition     int32    `json:"partition"`
	Offset        int64    `json:"offset"`
	Key           []byte   `json:"key"`
	Value         []byte   `json:"value"`
	Headers       []header `json:"headers"`
	Timestamp     int64    `json:"timestamp"`
	TimestampType int8     `json:"timestamp_type"`
	Control       bool     `json:"control"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "tiered_reader: "+format+"\n", args...)
	os.Exit(1)
}

// endOffsets asks the partitions' leaders for their end offsets under the isolation level.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string, partitions int32, isolation int8) map[int32]int64 {
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < partitions; p++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		fail("ListOffsets: %v", err)
	}
	end := make(map[int32]int64)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				fail("ListOffsets %s-%d: %v", topic, p.Partition, err)
			}
			end[p.Partition] = p.Offset
		}
	}
	if int32(len(end)) != partitions {
		fail("ListOffsets answered for %d of %d partitions", len(end), partitions)
	}
	return end
}

func main() {
	if len(os.Args) != 5 {
		fail("usage: tiered_reader BOOTSTRAP TOPIC PARTITIONS read_committed|read_uncommitted")
	}
	bootstrap, topic := os.Args[1], os.Args[2]
	n, err := strconv.Atoi(os.Args[3])
	if err != nil || n < 1 {
		fail("PARTITIONS must be a positive number, not %q", os.Args[3])
	}
	partitions := int32(n)
	var level kgo.IsolationLevel
	var isolation int8
	switch os.Args[4] {
	case "read_committed":
		level, isolation = kgo.ReadCommitted(), 1
	case "read_uncommitted":
		level, isolation = kgo.ReadUncommitted(), 0
	default:
		fail("isolation must be read_committed or read_uncommitted, not %q", os.Args[4])
	}

	start := make(map[int32]kgo.Offset)
	for p := int32(0); p < partitions; p++ {
		start[p] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.FetchIsolationLevel(level),
		kgo.KeepControlRecords(),
	)
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()

	end := endOffsets(ctx, cl, topic, partitions, isolation)
	next := make(map[int32]int64) // per partition: the offset after the last record given
	done := func() bool {
		for p := int32(0); p < partitions; p++ {
			if next[p] < end[p] {
				return false
			}
		}
		return true
	}
	out := json.NewEncoder(os.Stdout)
	for !done() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			fail("timed out after %s: read up to %v of end offsets %v", deadline, next, end)
		}
		// kgo retries retriable errors itself; what reaches here is fatal
		fetches.EachError(func(t string, p int32, err error) {
			fail("fetch %s-%d: %v", t, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset < next[r.Partition] {
				fail("%s-%d: offset %d after %d", topic, r.Partition, r.Offset, next[r.Partition]-1)
			}
			headers := []header{}
			for _, h := range r.Headers {
				headers = append(headers, header{h.Key, h.Value})
			}
			if err := out.Encode(line{
				Partition:     r.Partition,
				Offset:        r.Offset,
				Key:           r.Key,
				Value:         r.Value,
				Headers:       headers,
				Timestamp:     r.Timestamp.UnixMilli(),
				TimestampType: r.Attrs.TimestampType(),
				Control:       r.Attrs.IsControl(),
			}); err != nil {
				fail("stdout: %v", err)
			}
			next[r.Partition] = r.Offset + 1
		})
	}
}
