package azureenv

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFromEnv: the credential in use follows gocloud's order, and a
// connection string says which variable it came from (for messages).
func TestFromEnv(t *testing.T) {
	for _, tt := range []struct {
		name     string
		env      map[string]string
		useConn  bool
		conn     string
		connVar  string
		account  string
		keyOrSAS string
	}{
		{"connection string alone", map[string]string{Conn: "AccountName=a;AccountKey=k"}, true, "AccountName=a;AccountKey=k", Conn, "", ""},
		{"the alternative variable", map[string]string{ConnAlt: "AccountName=b"}, true, "AccountName=b", ConnAlt, "", ""},
		{"account and key first", map[string]string{Conn: "AccountName=a", Account: "acct", Key: "k1"}, false, "AccountName=a", Conn, "acct", "k1"},
		{"a SAS token first", map[string]string{Conn: "AccountName=a", Account: "acct", SAS: "sv=1"}, false, "AccountName=a", Conn, "acct", "sv=1"},
		{"an account without a key", map[string]string{Conn: "AccountName=a", Account: "acct"}, true, "AccountName=a", Conn, "acct", ""},
		{"nothing", map[string]string{}, false, "", ConnAlt, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{Conn, ConnAlt, Account, Key, SAS} {
				t.Setenv(k, tt.env[k])
			}
			c := FromEnv()
			if c.UseConn() != tt.useConn || c.Conn != tt.conn || c.ConnVar != tt.connVar || c.Account != tt.account || c.Key+c.SAS != tt.keyOrSAS {
				t.Errorf("FromEnv() = {Account:%q Conn:%q ConnVar:%q} UseConn %v; want Account %q Conn %q ConnVar %q UseConn %v", c.Account, c.Conn, c.ConnVar, c.UseConn(), tt.account, tt.conn, tt.connVar, tt.useConn)
			}
		})
	}
}

func TestConnField(t *testing.T) {
	conn := "DefaultEndpointsProtocol=http; AccountName=devstore;AccountKey=abc==;BlobEndpoint=http://127.0.0.1:10000/devstore;AccountName=last"
	for name, want := range map[string]string{"AccountKey": "abc==", "BlobEndpoint": "http://127.0.0.1:10000/devstore", "AccountName": "last", "Missing": ""} {
		if got := ConnField(conn, name); got != want {
			t.Errorf("ConnField(%s) = %q, want %q", name, got, want)
		}
	}
}
