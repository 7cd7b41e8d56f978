package hostport

import "testing"

func TestDialAndListen(t *testing.T) {
	for _, tt := range []struct {
		addr         string
		dial, listen string // the error, "" for accepted
	}{
		{"127.0.0.1:9092", "", ""},
		{"broker-0.kafka.svc:9092", "", ""},
		{"[::1]:9092", "", ""},
		{"localhost:65535", "", ""},
		{":8080", "has no host", ""},
		{"127.0.0.1:0", `has an invalid port "0"`, ""},
		{"[::1]:0", `has an invalid port "0"`, ""},
		{"localhost", "is not host:port", "is not host:port"},
		{"8080", "is not host:port", "is not host:port"},
		{"[::1:8080", "is not host:port", "is not host:port"},
		{"", "is not host:port", "is not host:port"},
		{"h:99999", `has an invalid port "99999"`, `has an invalid port "99999"`},
		{"h:70000", `has an invalid port "70000"`, `has an invalid port "70000"`},
		{"h:http", `has an invalid port "http"`, `has an invalid port "http"`},
		{"h:+80", `has an invalid port "+80"`, `has an invalid port "+80"`},
		{"h:-1", `has an invalid port "-1"`, `has an invalid port "-1"`},
		{"127.0.0.1:", `has an invalid port ""`, `has an invalid port ""`},
	} {
		for _, c := range []struct {
			name string
			fn   func(string) error
			want string
		}{{"Dial", Dial, tt.dial}, {"Listen", Listen, tt.listen}} {
			got := ""
			if err := c.fn(tt.addr); err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("%s(%q) = %q, want %q", c.name, tt.addr, got, c.want)
			}
		}
	}
}
