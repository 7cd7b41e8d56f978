package redact

import (
	"slices"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, tt := range []struct {
		name, in, want string
	}{
		// Nothing secret: returned exactly as written.
		{"local directory", "file:///var/lib/spillway", "file:///var/lib/spillway"},
		{"mem", "mem://", "mem://"},
		{"s3 settings", "s3://bucket?region=eu-west-1&endpoint=http://127.0.0.1:7070&use_path_style=true",
			"s3://bucket?region=eu-west-1&endpoint=http://127.0.0.1:7070&use_path_style=true"},
		{"no value to hide", "s3://b?sig&region=x", "s3://b?sig&region=x"},

		// Userinfo, whole: the user name may be a token or an access key id.
		{"user and password", "s3://AKIAEXAMPLE:wJalrXUtnFEMI@bucket/prefix?region=us-east-1", "s3://REDACTED@bucket/prefix?region=us-east-1"},
		{"user alone", "gs://token@b", "gs://REDACTED@b"},
		// Except Hadoop's Azure URLs, where it is the container's name; a
		// password there is still hidden.
		{"abfs container", "abfs://lake@acct.dfs.core.windows.net/raw", "abfs://lake@acct.dfs.core.windows.net/raw"},
		{"wasbs container", "WASBS://lake@acct.blob.core.windows.net/raw", "WASBS://lake@acct.blob.core.windows.net/raw"},
		{"abfs with a password", "abfs://lake:KEY1@acct.dfs.core.windows.net/raw", "abfs://REDACTED@acct.dfs.core.windows.net/raw"},

		// Query parameters named like a credential, in any case, kept in
		// their order, the others untouched.
		{"aws keys", "s3://bucket?region=us-east-1&access_key_id=AKIAID&secret_access_key=SECRET1&session_token=TOKEN1",
			"s3://bucket?region=us-east-1&access_key_id=REDACTED&secret_access_key=REDACTED&session_token=REDACTED"},
		{"presigned-style names", "s3://b?X-Amz-Credential=CRED1&X-Amz-Signature=SIG2&X-Amz-Security-Token=TOK3&Password=PW4&API_KEY=K5&passwd=P6&Authorization=A7",
			"s3://b?X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&X-Amz-Security-Token=REDACTED&Password=REDACTED&API_KEY=REDACTED&passwd=REDACTED&Authorization=REDACTED"},
		{"escaped name", "s3://b?secret%5Fkey=S1&region=r", "s3://b?secret%5Fkey=REDACTED&region=r"},
		// Every field of an Azure SAS token: together they are the credential.
		{"azure sas", "azblob://c?sv=2021-08-06&ss=b&srt=co&sp=rwdlac&se=2030-01-01&st=2020-01-01&spr=https&sig=abc%2Bdef&protocol=https",
			"azblob://c?sv=REDACTED&ss=REDACTED&srt=REDACTED&sp=REDACTED&se=REDACTED&st=REDACTED&spr=REDACTED&sig=REDACTED&protocol=https"},
		{"service sas", "azblob://c?sr=c&si=policy&sig=S", "azblob://c?sr=REDACTED&si=REDACTED&sig=REDACTED"},
		// A ';' is read as a separator, so a secret behind one is still hidden.
		{"semicolon", "s3://b?region=r;secret=S1", "s3://b?region=r;secret=REDACTED"},

		// A '#' in an unescaped secret starts a fragment: hide it too.
		{"fragment", "s3://b?secret=ab#cd", "s3://b?secret=REDACTED#REDACTED"},

		// A URL as a parameter's value (S3's endpoint): its credentials,
		// as written or percent-encoded; the host stays.
		{"endpoint with userinfo", "s3://b?endpoint=http://user:pass@127.0.0.1:9000&use_path_style=true",
			"s3://b?endpoint=http://REDACTED@127.0.0.1:9000&use_path_style=true"},
		{"escaped endpoint with userinfo", "s3://b?endpoint=http%3A%2F%2Fuser%3Apass%40host%3A9000&region=r",
			"s3://b?endpoint=http%3A%2F%2FREDACTED%40host%3A9000&region=r"},
		{"endpoint with a secret parameter", "s3://b?endpoint=https://h/?token%3DT1", "s3://b?endpoint=https%3A%2F%2Fh%2F%3Ftoken%3DREDACTED"},

		// Unparseable: hidden whole.
		{"does not parse", "s3://u:p@b:port?x", "REDACTED"},
		{"control character", "s3://user:SECRET@bucket/\x7f", "REDACTED"},
		{"missing @ makes the secret a port", "s3://AKIA:secret/bucket", "REDACTED"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := URL(tt.in); got != tt.want {
				t.Errorf("URL(%q)\n = %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestURLHidesEverySecret checks the promise from the other side: a value
// that is a credential never survives, whichever part of the URL holds it.
func TestURLHidesEverySecret(t *testing.T) {
	const secret = "Zq9-SECRET-value"
	for _, in := range []string{
		"s3://" + secret + "@b",
		"s3://user:" + secret + "@b",
		"s3://b?region=r&aws_secret_access_key=" + secret,
		"s3://b?X-Amz-Security-Token=" + secret + "&region=r",
		"azblob://c?sig=" + secret,
		"azblob://c?SIG=" + secret,
		"s3://b?region=r;token=" + secret,
		"s3://b?secret=ab#" + secret,
		"s3://user:" + secret + "@b:bad-port",
		"s3://AKIA:" + secret + "/bucket",
		"gs://b?password=" + secret,
		"gs://b?credentials_file=" + secret,
		"s3://b?endpoint=http://user:" + secret + "@h:9000",
		"s3://b?endpoint=http://" + secret + "@h:9000",
		"s3://b?endpoint=http%3A%2F%2Fuser%3A" + secret + "%40h",
	} {
		if got := URL(in); strings.Contains(got, secret) {
			t.Errorf("URL(%q) = %q shows the secret", in, got)
		}
	}
}

func TestIsSecretParam(t *testing.T) {
	for _, name := range []string{"sig", "SIG", "sv", "se", "st", "sp", "spr", "srt", "ss", "sr", "si", "sas",
		"key", "access_key_id", "secret", "token", "x-amz-signature", "password", "passwd", "credential", "auth"} {
		if !isSecretParam(name) {
			t.Errorf("isSecretParam(%q) = false", name)
		}
	}
	for _, name := range []string{"region", "endpoint", "use_path_style", "protocol", "profile", "storage_class", "ssetype", "s", "prefix"} {
		if isSecretParam(name) {
			t.Errorf("isSecretParam(%q) = true", name)
		}
	}
}

// TestSecrets: what a library's message may quote alone is listed, the
// credentials of an endpoint URL included.
func TestSecrets(t *testing.T) {
	got := Secrets("s3://AKIA1:pw-one@b?endpoint=http://user2:pw-two@h:9000&secret_key=sk-three&region=eu-1")
	for _, want := range []string{"AKIA1", "pw-one", "user2", "pw-two", "sk-three"} {
		if !slices.Contains(got, want) {
			t.Errorf("Secrets = %q, want %q among them", got, want)
		}
	}
	for _, not := range []string{"eu-1", "h:9000"} {
		if slices.Contains(got, not) {
			t.Errorf("Secrets = %q lists %q, which is no credential", got, not)
		}
	}
	// An abfs URL's user is its container: scrubbing it from messages
	// would only mangle them.
	if got := Secrets("abfs://lake@acct.dfs.core.windows.net/raw"); len(got) != 0 {
		t.Errorf("Secrets(abfs) = %q, want none", got)
	}
}
