// Package partvalue computes the values a record's files are partitioned
// by, and the text a path writes each as: the record key, escaped so that
// every key is a safe path segment that reads back (AppendKey, ParseKey);
// Iceberg's bucket of the key (KeyBucket); the civil date and hour of the
// record's time in a zone (Civil, LoadLocation); and Iceberg's transforms
// of fields of the record's value (Transform, ValueTransform), written as
// Iceberg's PartitionSpec.partitionToPath writes them in a Hive-style
// path.
//
// Package naming puts these values into file names; this package knows
// nothing of templates, and naming imports it, never the reverse.
//
// # Keys
//
// Keys are arbitrary bytes, and a name must stay a safe object key and
// file name. AppendKey writes a key with these rules, which give every key,
// null included, a rendering of its own (the escaping is injective):
//
//   - ASCII letters, digits and '-' are written as themselves, and so are
//     '_' and '.', except '_' and '.' as the key's first byte and '.' as its
//     last.
//   - Every other byte is written as '!' and two upper-case hex digits:
//     "a/b" is "a!2Fb", "!" is "!21", a space is "!20", "é" (UTF-8 C3 A9)
//     is "!C3!A9". A leading '_' or '.' ("!5F", "!2E") would hide the file
//     from Hive, Spark, Athena and DuckDB, which skip such names, and would
//     allow "." and ".."; a trailing '.' ("!2E") is dropped by Windows and
//     mishandled by Azure Blob.
//   - The null key is "null", as Aiven writes it. The key whose four bytes
//     are "null" is "!6Eull", so the two stay apart (Aiven writes both as
//     "null").
//   - The empty key is "!empty".
//   - A key whose rendering would be longer than 200 bytes is written as the
//     first 132 to 134 bytes of that rendering (cut before an escape, never
//     inside one), "!h", and the SHA-256 of the whole key in 64 lower-case
//     hex digits. At most 200 bytes, so names stay within S3's 1024-byte
//     keys and the 255 bytes of a local file name. Two long keys share a
//     name only if they share a SHA-256.
//
// A rendering is thus never empty, "." or "..", holds only [A-Za-z0-9._!-]
// (no "/", no byte that S3, GCS or Azure Blob ask users to avoid, nothing a
// file system refuses), and reads back with ParseKey: exactly, but for a
// long key, of which only the prefix can be. '!' escapes rather than '%' because
// Azure Blob can't take '%' in names and S3 lists it among the characters
// to avoid; the price is that Hive and Spark show an escaped key as it is
// written, not decoded. Aiven writes the key's text as it is, so keys made
// of letters, digits, '-' and inner '_' and '.' look the same in both, and
// a key with "/" makes directories in Aiven's names but not in Spillway's.
//
// # Value fields
//
// A value field's transform takes the types of Iceberg's spec (string,
// []byte, int32, int64, bool, Date, time.Time in UTC); Check refuses the
// rest, and AppendText writes the value as iceberg-go's PartitionToPath
// does: the transform's human string, URL-encoded (url.QueryEscape), with
// "null" for the null value and "%6Eull" for the string "null".
package partvalue
