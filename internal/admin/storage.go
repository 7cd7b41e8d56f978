package admin

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StorageMetrics counts storage requests, errors and retries. It satisfies
// storage.Observer, and is a prometheus.Collector to pass to New.
type StorageMetrics struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	retries  *prometheus.CounterVec
}

// NewStorageMetrics returns the metrics with the series of backend at 0, so
// that rate() and alerts see them from the first scrape.
func NewStorageMetrics(backend string) *StorageMetrics {
	m := &StorageMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "spillway_storage_request_duration_seconds",
			Help: "Duration of storage requests by backend (file, s3, gs, azblob) and op. op=commit is an upload's end: waiting for its last parts and completing the object, the latency a file's offsets wait for.",
			// From a local fsync to a part retried for a minute.
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"backend", "op"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spillway_storage_errors_total",
			Help: "Storage requests that failed (after the SDK's retries), by backend, op (commit, write, list, stat, read) and class: missing_bucket, credentials, access_denied, wrong_region, bad_bucket_name (fix the setup), exists (another writer has the key), canceled, timeout, other.",
		}, []string{"backend", "op", "class"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spillway_storage_retries_total",
			Help: "Failed storage tries that were retried, by backend and class: throttled (429, 503), server_error (other 5xx), network (no answer). The local backend never retries.",
		}, []string{"backend", "class"}),
	}
	m.duration.WithLabelValues(backend, "commit")
	m.errors.WithLabelValues(backend, "commit", "other")
	for _, class := range []string{"throttled", "server_error", "network"} {
		m.retries.WithLabelValues(backend, class)
	}
	return m
}

// Request implements storage.Observer.
func (m *StorageMetrics) Request(backend, op string, d time.Duration) {
	m.duration.WithLabelValues(backend, op).Observe(d.Seconds())
}

// Failed implements storage.Observer.
func (m *StorageMetrics) Failed(backend, op, class string) {
	m.errors.WithLabelValues(backend, op, class).Inc()
}

// Retry implements storage.Observer.
func (m *StorageMetrics) Retry(backend, class string) {
	m.retries.WithLabelValues(backend, class).Inc()
}

// Describe implements prometheus.Collector.
func (m *StorageMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.duration.Describe(ch)
	m.errors.Describe(ch)
	m.retries.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *StorageMetrics) Collect(ch chan<- prometheus.Metric) {
	m.duration.Collect(ch)
	m.errors.Collect(ch)
	m.retries.Collect(ch)
}
