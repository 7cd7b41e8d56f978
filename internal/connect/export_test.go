package connect

// The reader's pieces, for the tests of package connect_test, which import
// the products' sinks and so can't be package connect's own.
var (
	Parse           = parse
	ParseProperties = parseProperties
	SecretKey       = secretKey
)
