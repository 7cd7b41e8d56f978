package storage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/storage"
)

// azureEnv are the variables gocloud's azblob opener reads; each case
// starts with all of them empty.
var azureEnv = []string{
	"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGEBLOB_CONNECTIONSTRING", "AZURE_STORAGE_ACCOUNT",
	"AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_DOMAIN", "AZURE_STORAGE_PROTOCOL",
	"AZURE_STORAGE_IS_LOCAL_EMULATOR", "AZURE_STORAGE_IS_CDN",
}

// Azurite's documented account key: a secret as far as messages go.
const azuriteKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

// azuriteConn is Azurite's standard connection string, as its
// documentation gives it, on a port where nothing listens: Open does not
// connect.
const azuriteConn = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + azuriteKey +
	";BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;"

// TestOpenAzureConnectionStringAlone: a connection string that names its
// endpoint is used as it is, http included, with no other variable. The
// SDK's service-URL rules once refused it: `protocol "http" only allowed
// when IsLocalEmulator is true`.
func TestOpenAzureConnectionStringAlone(t *testing.T) {
	for _, k := range azureEnv {
		t.Setenv(k, "")
	}
	for _, v := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGEBLOB_CONNECTIONSTRING"} {
		t.Run(v, func(t *testing.T) {
			t.Setenv(v, azuriteConn)
			b, err := storage.Open(context.Background(), "azblob://container", storage.Options{})
			if err != nil {
				t.Fatalf("Open with %s alone: %v", v, err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOpenAzureSettingErrors: a setting Open can't use is named in the
// error, with what to change, and no secret is shown.
func TestOpenAzureSettingErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  string
		env  map[string]string
		want []string
	}{
		{
			name: "malformed connection string",
			url:  "azblob://c",
			env:  map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "AccountKey:" + azuriteKey[:20]},
			want: []string{"AZURE_STORAGE_CONNECTION_STRING: connection string is either blank or malformed"},
		},
		{
			name: "connection string without a key",
			url:  "azblob://c",
			env:  map[string]string{"AZURE_STORAGEBLOB_CONNECTIONSTRING": "AccountName=a;BlobEndpoint=http://127.0.0.1:1/a"},
			want: []string{"AZURE_STORAGEBLOB_CONNECTIONSTRING: connection string needs either AccountKey or SharedAccessSignature"},
		},
		{
			name: "url parameters beside a connection string",
			url:  "azblob://c?localemu=true&domain=127.0.0.1:1",
			env:  map[string]string{"AZURE_STORAGE_CONNECTION_STRING": azuriteConn},
			want: []string{"storage.url: remove domain=, localemu=: AZURE_STORAGE_CONNECTION_STRING names the endpoint"},
		},
		{
			name: "no credentials at all",
			url:  "azblob://c",
			want: []string{"no storage account: set AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT"},
		},
		{
			name: "http without an emulator",
			url:  "azblob://c",
			env:  map[string]string{"AZURE_STORAGE_ACCOUNT": "devstoreaccount1", "AZURE_STORAGE_KEY": azuriteKey, "AZURE_STORAGE_PROTOCOL": "http"},
			want: []string{`protocol "http" only allowed`, "set AZURE_STORAGE_IS_LOCAL_EMULATOR=true", "or use https in AZURE_STORAGE_PROTOCOL"},
		},
		{
			// gocloud's order: an account with a key comes before the
			// connection string, whose protocol still feeds the service URL.
			name: "account and key hide the connection string",
			url:  "azblob://c",
			env: map[string]string{"AZURE_STORAGE_ACCOUNT": "devstoreaccount1", "AZURE_STORAGE_KEY": azuriteKey,
				"AZURE_STORAGE_CONNECTION_STRING": azuriteConn},
			want: []string{"AZURE_STORAGE_CONNECTION_STRING is not used while AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY, or AZURE_STORAGE_SAS_TOKEN, is set",
				"set AZURE_STORAGE_IS_LOCAL_EMULATOR=true", "or use https in DefaultEndpointsProtocol of AZURE_STORAGE_CONNECTION_STRING"},
		},
		{
			name: "emulator off this machine",
			url:  "azblob://c?localemu=true&protocol=http",
			env:  map[string]string{"AZURE_STORAGE_ACCOUNT": "a", "AZURE_STORAGE_KEY": azuriteKey, "AZURE_STORAGE_DOMAIN": "10.1.2.3:10000"},
			want: []string{"set AZURE_STORAGE_DOMAIN to a loopback host:port"},
		},
		{
			name: "unknown url parameter",
			url:  "azblob://c?region=x",
			env:  map[string]string{"AZURE_STORAGE_ACCOUNT": "a", "AZURE_STORAGE_KEY": azuriteKey},
			want: []string{"storage.url: remove region=; azblob:// takes domain="},
		},
		{
			name: "a key that is not base64",
			url:  "azblob://c",
			env:  map[string]string{"AZURE_STORAGE_ACCOUNT": "a", "AZURE_STORAGE_KEY": "not base64!" + azuriteKey},
			want: []string{"storage: open azblob://c: AZURE_STORAGE_KEY: decode account key: illegal base64 data at input byte 3"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range azureEnv {
				t.Setenv(k, tc.env[k])
			}
			b, err := storage.Open(context.Background(), tc.url, storage.Options{})
			if err == nil {
				_ = b.Close()
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			t.Log(msg)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not say %q", w)
				}
			}
			if strings.Contains(msg, azuriteKey[:20]) {
				t.Errorf("error shows the key")
			}
		})
	}
}
