package source

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DeadLetterTo returns what the sink's error policy calls with a record
// that could not be written: it produces the record to topic, with the
// cause and origin in headers, and waits until it is acked. client is
// asked at each call, not before: the sink that takes the function is
// built before the source whose client produces.
func DeadLetterTo(topic string, client func() *kgo.Client) func(ctx context.Context, r *kgo.Record, cause error) error {
	return func(ctx context.Context, r *kgo.Record, cause error) error {
		dl := &kgo.Record{
			Topic: topic,
			Key:   r.Key,
			Value: r.Value,
			Headers: append(append([]kgo.RecordHeader(nil), r.Headers...),
				kgo.RecordHeader{Key: "spillway.error", Value: []byte(cause.Error())},
				kgo.RecordHeader{Key: "spillway.topic", Value: []byte(r.Topic)},
				kgo.RecordHeader{Key: "spillway.partition", Value: fmt.Append(nil, r.Partition)},
				kgo.RecordHeader{Key: "spillway.offset", Value: fmt.Append(nil, r.Offset)},
			),
		}
		// The policy that calls it names the record and the topic's role.
		return client().ProduceSync(ctx, dl).FirstErr()
	}
}
