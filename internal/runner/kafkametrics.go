package runner

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// newKafkaMetrics are the Kafka client's metrics (franz-go's kprom):
// connections, request errors and durations per broker. They are served
// from admin's own registry. kprom's fetch metrics are off: for every
// record batch fetched it builds a label set and looks its counter up,
// which at 1,000 partitions (small batches) took 4.5% of Spillway's CPU
// samples, on the goroutine that decodes fetches, which the poll loop
// waits on (docs/bench.md); fetchMetrics counts what they counted.
func newKafkaMetrics() *kprom.Metrics {
	return kprom.NewMetrics("spillway_kafka", kprom.Registry(nil),
		kprom.Histograms(kprom.RequestDurationE2E),
		// No detail: no fetch or produce metric is counted. Consistent
		// naming moves kprom's (unused) fetch_bytes_total out of
		// fetchMetrics's way.
		kprom.FetchAndProduceDetail(kprom.ConsistentNaming))
}

// fetchMetrics counts the bytes fetched per topic, uncompressed, as
// kprom's default fetch_bytes_total did (less its node_id label), with
// each topic's counter looked up once.
type fetchMetrics struct {
	bytes   *prometheus.CounterVec
	byTopic sync.Map // topic → prometheus.Counter
}

var _ kgo.HookFetchBatchRead = (*fetchMetrics)(nil)

func newFetchMetrics() *fetchMetrics {
	return &fetchMetrics{bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spillway_kafka",
		Name:      "fetch_bytes_total",
		Help:      "Bytes of records fetched, uncompressed, per topic.",
	}, []string{"topic"})}
}

// OnFetchBatchRead is kgo's hook, called for each record batch fetched.
func (m *fetchMetrics) OnFetchBatchRead(_ kgo.BrokerMetadata, topic string, _ int32, b kgo.FetchBatchMetrics) {
	c, ok := m.byTopic.Load(topic)
	if !ok {
		c, _ = m.byTopic.LoadOrStore(topic, m.bytes.WithLabelValues(topic))
	}
	c.(prometheus.Counter).Add(float64(b.UncompressedBytes))
}

func (m *fetchMetrics) Describe(ch chan<- *prometheus.Desc) { m.bytes.Describe(ch) }
func (m *fetchMetrics) Collect(ch chan<- prometheus.Metric) { m.bytes.Collect(ch) }
